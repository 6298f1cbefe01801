"""Write-back to the fake Linear: a claim by an agent's seat delegates the issue to the
agent (the person assigned stays assigned) and moves it to the team's first started
state; a claim by a user account's seat assigns it; a release takes back only the
seat's own account; blocked is a label, done and dropped a completed or canceled state;
a note is a comment carrying the write's mark. What Linear would refuse is refused
before anything is sent, and a person's edit during a seat's write is never undone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.hosted.writeback import mark_in
from tests.providers.linear._support import (
    BUILDER,
    REVIEWER,
    LinearEndpoint,
    open_linear,
    task_id,
)
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import Issue, User


async def imported(ln: LinearEndpoint, n: int = 1) -> list[Issue]:
    made = []
    for k in range(n):
        ln.fake.advance(60)
        made.append(ln.fake.new_issue(f"Issue {k + 1}", f"Body {k + 1}"))
    await ln.poll()
    return made


def writes(fake: FakeLinear, since: int) -> list[tuple[str, Any]]:
    return [(r.path, r.body["variables"]) for r in fake.requests[since:] if r.is_write]


async def refused(coro: Any, code: ErrorCode) -> ContractError:
    with pytest.raises(ContractError) as caught:
        await coro
    assert caught.value.code is code, caught.value.message
    return caught.value


async def test_an_agents_claim_delegates_while_the_person_stays_assigned(
    linear: FakeLinear, ln: LinearEndpoint, agent: User, person: User
) -> None:
    (issue,) = await imported(ln)
    linear.assign(issue, person)
    await ln.poll()
    mark = len(linear.requests)
    claimed = await ln.client.claim(BUILDER, task_id(1))
    ((path, sent),) = writes(linear, mark)
    assert path == "/issues/ENG-1/issueUpdate"
    started = linear.state("ENG", "In Progress")
    assert sent["input"] == {"stateId": started.id, "delegateId": agent.id}
    assert (issue.assignee, issue.delegate, issue.state.name) == (
        person.id,
        agent.id,
        "In Progress",
    )
    assert (claimed["status"], claimed["statusSource"]) == ("claimed", "In Progress")
    assert claimed["binding"]["actor"] == BUILDER.actor
    await ln.poll()  # the echo changes nothing
    assert await ln.get(1) == claimed


async def test_a_user_accounts_claim_assigns_it(
    linear: FakeLinear, ln: LinearEndpoint, reviewer: User
) -> None:
    (issue,) = await imported(ln)
    claimed = await ln.client.claim(REVIEWER, task_id(1))
    assert (issue.assignee, issue.delegate) == (reviewer.id, None)
    assert claimed["binding"]["actor"] == REVIEWER.actor


async def test_a_claim_never_replaces_a_persons_assignment(
    linear: FakeLinear, ln: LinearEndpoint, person: User
) -> None:
    (issue,) = await imported(ln)
    linear.assign(issue, person)
    await ln.poll()
    mark = len(linear.requests)
    error = await refused(ln.client.claim(REVIEWER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert error.outcome == "not-executed"
    assert "never replaces" in error.message
    assert writes(linear, mark) == []
    assert (issue.assignee, issue.state.name) == (person.id, "Todo")


async def test_unbinding_takes_back_only_what_the_bridge_set(
    linear: FakeLinear, ln: LinearEndpoint, agent: User, person: User
) -> None:
    (issue,) = await imported(ln)
    linear.assign(issue, person)
    await ln.poll()
    await ln.client.claim(BUILDER, task_id(1))
    freed = await ln.client.administer(task_id(1), unbind=True)
    assert (issue.assignee, issue.delegate, issue.state.name) == (person.id, None, "Todo")
    assert (freed["status"], freed.get("binding")) == ("open", None)


async def test_blocked_is_a_label_and_done_and_dropped_are_closing_states(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    first, second = await imported(ln, 2)
    await ln.client.claim(BUILDER, task_id(1))
    blocked = await ln.client.update(BUILDER, task_id(1), status="blocked", note="waits on CI")
    assert [linear.labels[x].name for x in first.label_ids] == ["Blocked"]
    assert (blocked["status"], blocked["statusSource"]) == ("blocked", "Blocked")
    assert first.state.name == "In Progress"
    (comment,) = first.comments
    assert comment.body.startswith("waits on CI")
    assert mark_in(comment.body)
    done = await ln.client.update(BUILDER, task_id(1), status="done")
    assert (first.state.name, first.label_ids) == ("Done", [])
    assert (done["status"], done["statusSource"]) == ("done", "Done")
    await ln.client.claim(BUILDER, task_id(2))
    dropped = await ln.client.update(BUILDER, task_id(2), status="dropped")
    assert second.state.name == "Canceled"
    assert (dropped["status"], dropped["statusSource"]) == ("dropped", "Canceled")


async def test_a_label_linear_lacks_is_refused_before_anything_is_sent(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    await imported(ln)
    await ln.client.claim(BUILDER, task_id(1))
    linear.labels.clear()
    mark = len(linear.requests)
    error = await refused(
        ln.client.update(BUILDER, task_id(1), status="blocked"), ErrorCode.FAILED_PRECONDITION
    )
    assert (error.outcome, writes(linear, mark)) == ("not-executed", [])
    assert "no label 'Blocked'" in error.message


async def test_create_task_makes_an_issue_in_the_home_team_carrying_the_mark(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    created = await ln.client.create("Write the docs", brief="Two pages")
    assert created["taskId"] == "ENG-1"
    (issue,) = linear.issues.values()
    assert issue.title == "Write the docs"
    assert issue.description
    assert issue.description.startswith("Two pages")
    assert mark_in(issue.description)
    assert created["brief"] == "Two pages"  # the mark is never shown


async def test_a_persons_edit_during_a_seats_write_is_never_undone(
    linear: FakeLinear, ln: LinearEndpoint, person: User
) -> None:
    (issue,) = await imported(ln)
    linear.move(issue, "Done")  # a person closes it; the mirror has not read it yet
    mark = len(linear.requests)
    with pytest.raises(ContractError) as caught:
        await ln.client.claim(BUILDER, task_id(1))
    assert (caught.value.code, caught.value.outcome) == (ErrorCode.CONFLICT, "not-executed")
    assert writes(linear, mark) == []
    assert issue.state.name == "Done"
    record = await ln.get(1)  # the mirror shows what the person did, at once
    assert (record["status"], record["statusSource"]) == ("done", "Done")


async def test_create_task_carries_what_the_scope_needs_and_stays_in_it(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    linear.add_label("agent-ready")
    linear.add_project("Agents")
    linear.teams["ENG"].active_cycle = 7
    scope = {"scope": {"labels": ["agent-ready"]}, "project": "Agents", "cycle": "active"}
    async with open_linear(linear, linear_url, tmp_path / "b", **scope) as scoped:
        created = await scoped.client.create("Scoped work", brief="inside the slice")
        (issue,) = linear.issues.values()
        assert (issue.label_names, issue.project, issue.cycle) == (["agent-ready"], "Agents", 7)
        linear.set_title(issue, "Scoped work, renamed")
        linear.advance(5)
        await scoped.poll()  # the scoped listing still finds it
        assert (await scoped.client.get(created["taskId"]))["title"] == "Scoped work, renamed"


async def test_a_scope_linear_cannot_give_a_new_issue_is_refused_before_sending(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    async with open_linear(linear, linear_url, tmp_path / "b", project="Nowhere") as scoped:
        mark = len(linear.requests)
        error = await refused(scoped.client.create("Lost"), ErrorCode.FAILED_PRECONDITION)
        assert "no project named 'Nowhere'" in error.message
        assert (error.outcome, writes(linear, mark), linear.issues) == ("not-executed", [], {})
