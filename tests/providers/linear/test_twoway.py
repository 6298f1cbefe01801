"""Two-way on Linear: a person's edit in Linear and a seat's write to the same issue,
interleaved by the shared harness (``tests.providers.twoway.harness``).

Each case checks a row of the conflict table in ``docs/linear.md`` on Linear (the fake)
and in the mirror within one poll, with no lost update, no duplicate write and no write
loop. Linear's side of the harness: an issue's writes are its mutations (the fake logs
``/issues/ENG-1/issueUpdate`` and ``…/commentCreate``), its one-issue read is the
``Issue`` query, a POST like every GraphQL request.
"""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ErrorCode
from tests.providers.linear._support import BUILDER, LinearEndpoint, task_id
from tests.providers.twoway.harness import (
    HOOKS,
    WHEN,
    assert_no_write_loop,
    tracker_writes,
    write_beside_edit,
)
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import User

Json = dict[str, Any]


class LinearSide:
    read_method = "POST"

    def __init__(self, fake: FakeLinear) -> None:
        self.fake = fake

    def write_path(self, number: int) -> str:
        return f"/issues/ENG-{number}/*"

    def read_path(self, number: int) -> str:
        return "/graphql/Issue"


async def claimed_by_builder(linear: FakeLinear, ln: LinearEndpoint) -> Json:
    """Issue 1, mirrored and claimed by ``BUILDER`` (delegated, In Progress), polled."""
    linear.new_issue("Ship the parser")
    linear.advance(61)
    await ln.poll()
    claimed = await ln.client.claim(BUILDER, task_id(1))
    linear.advance(61)
    await ln.poll()
    return claimed


@pytest.mark.parametrize("hooks", HOOKS)
@pytest.mark.parametrize("when", WHEN)
async def test_a_rename_and_a_seats_write_both_stand(
    linear: FakeLinear, ln: LinearEndpoint, agent: User, when: str, hooks: str
) -> None:
    await claimed_by_builder(linear, ln)
    mark = len(linear.requests)
    write = ln.client.update(BUILDER, task_id(1), status="blocked", note="Waiting on CI.")
    issue = linear.issue("ENG-1")

    def edit() -> None:
        linear.set_title(issue, "Ship the parser, v2")

    reply = await write_beside_edit(ln, LinearSide(linear), 1, write, edit, when=when, hooks=hooks)

    assert reply.error is None, reply.error
    assert reply.record is not None
    assert reply.record["status"] == "blocked"
    linear.advance(5)
    await ln.poll()  # within one poll
    record = await ln.get(1)
    assert (record["title"], record["status"]) == ("Ship the parser, v2", "blocked")
    assert (issue.title, issue.label_names, issue.state.name) == (
        "Ship the parser, v2",
        ["Blocked"],
        "In Progress",
    )
    assert issue.delegate == agent.id
    writes = tracker_writes(linear, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    assert len([c for c in issue.comments if "Waiting on CI." in c.body]) == 1
    await assert_no_write_loop(ln, linear)


@pytest.mark.parametrize("when", WHEN)
async def test_a_person_canceling_while_a_seat_blocks_is_never_undone(
    linear: FakeLinear, ln: LinearEndpoint, when: str
) -> None:
    await claimed_by_builder(linear, ln)
    mark = len(linear.requests)
    write = ln.client.update(BUILDER, task_id(1), status="blocked")
    issue = linear.issue("ENG-1")

    def edit() -> None:
        linear.move(issue, "Canceled")

    side = LinearSide(linear)
    reply = await write_beside_edit(ln, side, 1, write, edit, when=when, hooks="absent")
    if when == "before":
        assert reply.error is not None, reply.record
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "not-executed")
        assert tracker_writes(linear, mark) == []
    elif when.startswith("during"):
        # The write takes back its own label and delegation; the seat hears it.
        assert reply.error is not None, reply.record
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "executed")
        assert "Blocked" not in issue.label_names
    else:
        assert reply.record is not None, reply.error
        assert reply.record["status"] == "blocked"
    linear.advance(5)
    await ln.poll()
    record = await ln.get(1)
    assert (record["status"], record["statusSource"]) == ("dropped", "Canceled")
    assert issue.state.name == "Canceled"  # never moved back
    await assert_no_write_loop(ln, linear)


async def test_a_person_removing_the_agent_unbinds_and_is_not_undone(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    await claimed_by_builder(linear, ln)
    issue = linear.issue("ENG-1")
    mark = len(linear.requests)
    linear.delegate_to(issue, None)
    linear.advance(5)
    await ln.poll()
    record = await ln.get(1)
    assert (record["status"], record.get("binding")) == ("open", None)
    assert tracker_writes(linear, mark) == []
    assert issue.delegate is None
    await assert_no_write_loop(ln, linear)
