"""Two-way on Jira: a person's edit in Jira and a seat's write to the same issue,
interleaved by the shared harness (``tests.providers.twoway.harness``).

Each case checks the rule of the conflict table in ``docs/jira.md`` on Jira (the fake)
and in the mirror within one poll, with no lost update, no duplicate write and no write
loop. Jira's side of the harness: an issue's writes are the requests under its key
(``/rest/api/3/issue/DEMO-1...``: the labels and description edit, the assignee, the
transition, comments and marks), its one-issue read is ``GET /rest/api/3/issue/DEMO-1``,
and a search is a read although it is a POST.
"""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ErrorCode
from tests.bridge._support import DictPresence
from tests.providers.jira._support import (
    BUILDER,
    HUMAN,
    SEAT_ACCOUNT,
    JiraEndpoint,
    task_id,
)
from tests.providers.twoway.harness import (
    HOOKS,
    WHEN,
    answer,
    assert_no_write_loop,
    deliver,
    during_write,
    tracker_writes,
    write_beside_edit,
)
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

Json = dict[str, Any]
ISSUE = "/rest/api/3/issue"


class JiraSide:
    def __init__(self, fake: FakeJira) -> None:
        self.fake = fake

    def write_path(self, number: int) -> str:
        return f"{ISSUE}/{PROJECT}-{number}*"  # the issue's edit, and under it

    def read_path(self, number: int) -> str:
        return f"{ISSUE}/{PROJECT}-{number}"


def rename(fake: FakeJira, number: int, title: str) -> None:
    fake.advance(1)
    issue = fake.issue(number)
    issue.summary = title
    fake.touch(issue)


def close_as_wont_do(fake: FakeJira, number: int) -> None:
    fake.advance(1)
    fake.set_status(fake.issue(number), "Done", "Won't Do")


async def claimed_by_builder(jira: FakeJira, jr: JiraEndpoint, presence: DictPresence) -> Json:
    """Issue 1, mirrored and claimed by ``BUILDER`` (assigned, In Progress), then polled."""
    presence.put(BUILDER, environment=None)
    jira.add_issue(PROJECT, "Ship the parser")
    jira.advance(61)
    await jr.poll()
    claimed = await jr.client.claim(BUILDER, task_id(1))
    jira.advance(61)
    await jr.poll()
    return claimed


def comments_with(jira: FakeJira, text: str) -> int:
    from cotal_tasks.providers.jira import adf

    return len([c for c in jira.issue(1).comments if text in (adf.to_text(c.body) or "")])


# -- the matrix: where the person's edit lands, and what the webhooks do ------------------
#
# A seat blocks issue 1 (claimed by it) while a person renames the issue. The rule: the
# summary is the person's, the status (the ``blocked`` label) the seat's; both stand, in
# Jira and in the mirror, within one poll, with one write of each kind and no write over
# three idle polls.


@pytest.mark.parametrize("hooks", HOOKS)
@pytest.mark.parametrize("when", WHEN)
async def test_a_rename_and_a_seats_write_both_stand(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence, when: str, hooks: str
) -> None:
    await claimed_by_builder(jira, jr, presence)
    mark = len(jira.requests)
    write = jr.client.update(BUILDER, task_id(1), status="blocked", note="Waiting on CI.")

    def edit() -> None:
        rename(jira, 1, "Ship the parser, v2")

    reply = await write_beside_edit(jr, JiraSide(jira), 1, write, edit, when=when, hooks=hooks)

    assert reply.error is None, reply.error  # a true outcome: the write took effect
    assert reply.record is not None
    assert reply.record["status"] == "blocked"
    jira.advance(5)
    await jr.poll()  # within one poll
    record = await jr.get(1)
    assert (record["title"], record["status"]) == ("Ship the parser, v2", "blocked")
    issue = jira.issue(1)
    assert (issue.summary, issue.labels, issue.status) == (
        "Ship the parser, v2",
        ["blocked"],
        "In Progress",
    )
    assert issue.assignee == SEAT_ACCOUNT
    writes = tracker_writes(jira, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    assert comments_with(jira, "Waiting on CI.") == 1
    await assert_no_write_loop(jr, jira)


@pytest.mark.parametrize("when", WHEN)
async def test_a_person_closing_while_a_seat_blocks_is_never_undone(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence, when: str
) -> None:
    """Conflict table, "transitions the issue": a Done a person made stands; the bridge
    never transitions it back, whenever it lands."""
    await claimed_by_builder(jira, jr, presence)
    mark = len(jira.requests)
    write = jr.client.update(BUILDER, task_id(1), status="blocked")

    def edit() -> None:
        close_as_wont_do(jira, 1)

    side = JiraSide(jira)
    reply = await write_beside_edit(jr, side, 1, write, edit, when=when, hooks="absent")
    if when == "before":
        assert reply.error is not None, reply.record
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "not-executed")
        assert tracker_writes(jira, mark) == []
    elif when.startswith("during"):
        # The write takes back its own label; the seat hears what happened.
        assert reply.error is not None, reply.record
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "executed")
        assert "blocked" not in jira.issue(1).labels
    else:  # the write answered before the person's close
        assert reply.record is not None, reply.error
        assert reply.record["status"] == "blocked"
    jira.advance(5)
    await jr.poll()
    record = await jr.get(1)
    assert (record["status"], record["statusSource"]) == ("dropped", "Done/Won't Do")
    issue = jira.issue(1)
    assert (issue.status, issue.resolution) == ("Done", "Won't Do")  # never reopened
    writes = [(r.method, r.path, repr(r.body)) for r in jira.requests[mark:] if r.is_write]
    assert not any(path.endswith("/transitions") for _, path, _ in writes), writes
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    await assert_no_write_loop(jr, jira)


async def test_a_claim_of_an_issue_a_person_just_closed_answers_conflict(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    jira.add_issue(PROJECT, "Ship the parser")
    jira.advance(61)
    await jr.poll()
    mark = len(jira.requests)
    close_as_wont_do(jira, 1)  # before the poll sees it

    reply = await answer(jr.client.claim(BUILDER, task_id(1)))

    assert reply.error is not None, reply.record
    assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "not-executed")
    issue = jira.issue(1)
    assert (issue.status, issue.assignee, issue.labels) == ("Done", None, [])
    assert tracker_writes(jira, mark) == []
    record = await jr.get(1)  # the mirror shows what the person did, at once
    assert (record["status"], record["statusSource"]) == ("dropped", "Done/Won't Do")
    assert "binding" not in record
    await assert_no_write_loop(jr, jira)


async def test_a_claim_while_a_person_closes_leaves_no_seat_on_the_closed_issue(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    """The close lands after the bridge's read and before its writes, as on GitHub and
    GitLab: the claim takes back the assignee it wrote and the seat hears ``conflict``
    (executed). Before: the assignment stayed on the Done issue, and the seat heard
    Jira's refusal of the In Progress transition as a failed precondition."""
    presence.put(BUILDER, environment=None)
    jira.add_issue(PROJECT, "Ship the parser")
    jira.advance(61)
    await jr.poll()
    reply = await during_write(
        jr,
        JiraSide(jira),
        1,
        jr.client.claim(BUILDER, task_id(1)),
        lambda: close_as_wont_do(jira, 1),
    )
    assert reply.error is not None, reply.record
    assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "executed")
    assert "closed on the tracker while this write was on its way" in reply.error.message
    issue = jira.issue(1)
    assert (issue.status, issue.resolution, issue.assignee) == ("Done", "Won't Do", None)
    record = await jr.get(1)
    assert (record["status"], record["statusSource"]) == ("dropped", "Done/Won't Do")
    assert "binding" not in record
    await assert_no_write_loop(jr, jira)


async def test_a_person_reassigning_an_issue_a_seat_holds_unbinds_and_is_not_undone(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    await claimed_by_builder(jira, jr, presence)
    mark = len(jira.requests)
    issue = jira.issue(1)
    issue.assignee = HUMAN  # a person takes it over in Jira
    jira.touch(issue)

    await deliver(jr, 1)

    task = await jr.get(1)
    assert (task["status"], task.get("binding")) == ("open", None)
    assert task["statusSource"] == "In Progress"
    assert tracker_writes(jira, mark) == []  # nothing written back
    assert issue.assignee == HUMAN
    await assert_no_write_loop(jr, jira)


async def test_a_person_closing_an_issue_a_seat_holds_is_mirrored(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    await claimed_by_builder(jira, jr, presence)
    mark = len(jira.requests)
    jira.advance(1)
    jira.set_status(jira.issue(1), "Done", "Duplicate")

    await jr.poll()

    task = await jr.get(1)
    assert (task["status"], task["statusSource"]) == ("dropped", "Done/Duplicate")
    assert tracker_writes(jira, mark) == []
    await assert_no_write_loop(jr, jira)


async def test_a_person_assigning_while_the_claims_own_assignment_is_in_flight(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    """Conflict table, "assigns someone in the claim's last moment": the person's
    assignment lands after the bridge read the assignee again, while its own
    ``PUT /assignee`` is on its way. Jira has no conditional write of the assignee (no
    revision to send, no compare-and-set), so the later write wins on Jira's side; what
    the bridge owes is the truth afterwards: the reply and the mirror say what Jira
    holds, and nothing is written again. ``docs/jira.md`` names this window."""
    presence.put(BUILDER, environment=None)
    jira.add_issue(PROJECT, "Ship the parser")
    jira.advance(61)
    await jr.poll()
    mark = len(jira.requests)

    def person_assigns() -> None:
        issue = jira.issue(1)
        issue.assignee = HUMAN
        jira.touch(issue)

    reply = await during_write(
        jr, JiraSide(jira), 1, jr.client.claim(BUILDER, task_id(1)), person_assigns
    )

    assert reply.record is not None, reply.error
    issue = jira.issue(1)
    assert (issue.assignee, issue.status) == (SEAT_ACCOUNT, "In Progress")
    assert reply.record["binding"]["actor"] == BUILDER.actor
    jira.advance(5)
    await jr.poll()
    assert (await jr.get(1))["binding"]["actor"] == BUILDER.actor
    writes = tracker_writes(jira, mark)
    assert [w for w in writes if w[1].endswith("/assignee")] == [
        ("PUT", f"{ISSUE}/{PROJECT}-1/assignee")
    ]
    await assert_no_write_loop(jr, jira)
