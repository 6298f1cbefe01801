"""Write-back to the fake Jira: a claim assigns the seat's account and moves the issue
through the workflow's transitions (discovered per issue); done and dropped move it to
Done with the configured resolution; a note becomes an ADF comment carrying the write's
mark as an entity property. What Jira's workflow would refuse is refused before anything
is written, with the contract's error and an honest ``outcome``."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.jira import adf
from tests.bridge._support import OPERATOR, DictPresence
from tests.providers.jira._support import (
    BUILDER,
    HUMAN,
    REVIEWER,
    REVIEWER_ACCOUNT,
    SEAT_ACCOUNT,
    JiraEndpoint,
    open_jira,
    task_id,
)
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT, Issue, Transition, wont_do_first

Json = dict[str, Any]


@pytest.fixture(autouse=True)
def seats_present(presence: DictPresence) -> None:
    for who in (BUILDER, REVIEWER):
        presence.put(who, environment=None)


async def imported(jr: JiraEndpoint, n: int = 1) -> list[Issue]:
    issues = []
    for k in range(n):
        jr.fake.advance(60)
        issues.append(jr.fake.add_issue(PROJECT, f"Issue {k + 1}", f"Body {k + 1}"))
    await jr.poll()
    return issues


def writes(fake: FakeJira, since: int) -> list[tuple[str, str]]:
    sent = [r for r in fake.requests[since:] if r.is_write]
    return [(r.method, r.path.removeprefix("/rest/api/3/issue/")) for r in sent]


async def refused(coro: Any, code: ErrorCode) -> ContractError:
    with pytest.raises(ContractError) as caught:
        await coro
    assert caught.value.code is code, caught.value.message
    return caught.value


async def test_claim_assigns_the_seat_and_moves_the_issue_in_progress(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    mark = len(jira.requests)
    claimed = await jr.client.claim(BUILDER, task_id(1))
    assert writes(jira, mark) == [("PUT", "DEMO-1/assignee"), ("POST", "DEMO-1/transitions")]
    (post,) = jira.calls("POST", "*/transitions")
    assert post.body == {"transition": {"id": "11"}}
    assert jira.calls("GET", "*/transitions")[0].query == {"expand": "transitions.fields"}
    assert (issue.assignee, issue.status) == (SEAT_ACCOUNT, "In Progress")
    assert (claimed["status"], claimed["statusSource"]) == ("claimed", "In Progress")
    assert claimed["binding"]["actor"] == BUILDER.actor
    assert await jr.get(1) == claimed
    await jr.poll()  # the echo changes nothing
    assert await jr.get(1) == claimed


async def test_claim_moves_to_the_configured_status(
    jira: FakeJira, jira_url: str, tmp_path: Any, presence: DictPresence
) -> None:
    async with open_jira(
        jira, jira_url, tmp_path / "b", presence=presence, claimed_status="In Review"
    ) as jr:
        (issue,) = await imported(jr)
        jira.workflow[0].to = "In Review"  # "Start progress" leads to In Review here
        claimed = await jr.client.claim(BUILDER, task_id(1))
        assert issue.status == "In Review"
        assert claimed["statusSource"] == "In Review"


async def test_a_claim_never_replaces_a_persons_assignment(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    issue.assignee = HUMAN
    mark = len(jira.requests)
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert error.outcome == "not-executed"
    assert "never replaces a person's assignment" in error.message
    assert writes(jira, mark) == []
    assert (issue.assignee, issue.status) == (HUMAN, "To Do")


async def test_a_person_assigning_during_the_claim_is_not_undone(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)

    def person_assigns(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path.endswith("/transitions"):
            issue.assignee = HUMAN  # between the bridge's first read and its write

    jira.before_answer = person_assigns
    mark = len(jira.requests)
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert error.outcome == "not-executed"
    assert writes(jira, mark) == []
    assert issue.assignee == HUMAN


async def test_no_transition_to_in_progress_is_refused_before_any_write(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    jira.workflow = [t for t in jira.workflow if t.to != "In Progress"]
    mark = len(jira.requests)
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert error.outcome == "not-executed"
    assert "no transition from 'To Do' to the 'indeterminate' category" in error.message
    assert "claimed_status" in error.message
    assert writes(jira, mark) == []
    assert (issue.assignee, issue.status) == (None, "To Do")
    assert (await jr.get(1))["status"] == "open"


async def test_a_transition_with_a_required_screen_field_is_reported_not_guessed(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    await imported(jr)
    jira.workflow[0].screen = {
        "customfield_10016": {"required": True, "hasDefaultValue": False, "name": "Story points"}
    }
    mark = len(jira.requests)
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert "requires 'Story points' on its screen" in error.message
    # Nothing was sent: the reply does not say Jira answered (it once said "answered 422").
    assert error.message.startswith("nothing was written to Jira"), error.message
    assert "answered" not in error.message
    assert error.outcome == "not-executed"
    assert writes(jira, mark) == []


async def test_done_moves_to_done_with_the_resolution_the_screen_requires(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    await jr.client.claim(BUILDER, task_id(1))
    done = await jr.client.update(BUILDER, task_id(1), status="done")
    post = jira.calls("POST", "*/transitions")[-1]
    assert post.body == {"transition": {"id": "31"}, "fields": {"resolution": {"name": "Done"}}}
    assert (issue.status, issue.resolution) == ("Done", "Done")
    assert (done["status"], done["statusSource"]) == ("done", "Done")


async def test_dropped_closes_with_the_dropped_resolution(jira: FakeJira, jr: JiraEndpoint) -> None:
    (issue,) = await imported(jr)
    dropped = await jr.client.administer(task_id(1), status="dropped")
    assert (issue.status, issue.resolution) == ("Done", "Won't Do")
    assert (dropped["status"], dropped["statusSource"]) == ("dropped", "Done/Won't Do")


async def test_a_resolution_the_workflow_does_not_offer_is_refused(
    jira: FakeJira, jira_url: str, tmp_path: Any, presence: DictPresence
) -> None:
    async with open_jira(
        jira, jira_url, tmp_path / "b", presence=presence, dropped_resolution="Obsolete"
    ) as jr:
        (issue,) = await imported(jr)
        mark = len(jira.requests)
        error = await refused(
            jr.client.administer(task_id(1), status="dropped"), ErrorCode.FAILED_PRECONDITION
        )
        assert "offers no resolution 'Obsolete'" in error.message
        assert error.outcome == "not-executed"
        assert writes(jira, mark) == []
        assert issue.status == "To Do"


@pytest.mark.parametrize("start", ["To Do", "Blocked"])
async def test_done_takes_the_transition_that_resolves_done_not_the_first_into_done(
    jira: FakeJira, jr: JiraEndpoint, start: str
) -> None:
    """Before: the first transition into the Done category was taken, a screenless "Won't
    do" in this workflow, so done answered ok and left the task dropped (Won't Do)."""
    jira.workflow = wont_do_first()
    (issue,) = await imported(jr)
    issue.status = start
    await jr.poll()
    done = await jr.client.administer(task_id(1), status="done")
    post = jira.calls("POST", "*/transitions")[-1]
    assert post.body == {"transition": {"id": "71"}}
    assert (issue.status, issue.resolution) == ("Done", "Done")
    assert (done["status"], done["statusSource"]) == ("done", "Done")
    (other,) = await imported(jr)
    dropped = await jr.client.administer(task_id(2), status="dropped")
    assert (other.status, other.resolution) == ("Done", "Won't Do")  # "Won't do" this time
    assert dropped["status"] == "dropped"


async def test_create_task_done_lands_done_in_that_workflow(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    jira.workflow = wont_do_first()
    created = await jr.client.create("Already handled", status="done")
    assert (jira.issue(1).status, jira.issue(1).resolution) == ("Done", "Done")
    assert created["status"] == "done"


async def test_done_is_refused_when_no_transition_can_be_shown_to_resolve_done(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    """A workflow whose only ways into Done resolve on their own under other names: the
    write is refused, naming the transitions and the remedy; nothing is written."""
    jira.workflow = [
        Transition("61", "Won't do", "Done", None, resolves="Won't Do"),
        Transition("81", "Close", "Done", None, resolves="Duplicate"),
    ]
    (issue,) = await imported(jr)
    mark = len(jira.requests)
    error = await refused(
        jr.client.administer(task_id(1), status="done"), ErrorCode.FAILED_PRECONDITION
    )
    assert "sets the resolution 'Done'" in error.message
    assert "Won't do → Done" in error.message
    assert "Resolution field on the screen" in error.message
    assert error.outcome == "not-executed"
    assert writes(jira, mark) == []
    assert (issue.status, issue.resolution) == ("To Do", None)


async def test_release_unassigns_and_moves_back_to_to_do(jira: FakeJira, jr: JiraEndpoint) -> None:
    (issue,) = await imported(jr)
    await jr.client.claim(BUILDER, task_id(1))
    released = await jr.client.administer(task_id(1), unbind=True)
    assert (issue.assignee, issue.status) == (None, "To Do")
    assert (released["status"], released["statusSource"]) == ("open", "To Do")


async def test_blocked_adds_the_label_and_stays_in_progress(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    await jr.client.claim(BUILDER, task_id(1))
    blocked = await jr.client.update(BUILDER, task_id(1), status="blocked")
    assert (issue.labels, issue.status) == (["blocked"], "In Progress")
    assert (blocked["status"], blocked["statusSource"]) == ("blocked", "blocked")


async def test_a_note_becomes_an_adf_comment_marked_by_a_property(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    await jr.client.claim(BUILDER, task_id(1))
    await jr.client.update(BUILDER, task_id(1), note="Parser done, tests next")
    (comment,) = issue.comments
    assert comment.body == adf.from_text("Parser done, tests next")
    assert adf.to_text(comment.body) == "Parser done, tests next"  # nothing hidden in it
    (mark,) = comment.properties["cotal-tasks"].values()
    assert len(mark) >= 8


async def test_bind_by_an_operator_assigns_the_target_seat(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    bound = await jr.client.bind(REVIEWER, task_id(1))
    assert issue.assignee == REVIEWER_ACCOUNT
    assert bound["binding"]["boundBy"] == OPERATOR.principal


async def test_create_task_makes_an_issue_marked_by_a_property(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    await imported(jr)
    created = await jr.client.create("Ship the parser", brief="Ship it.")
    assert created["taskId"] == task_id(2)
    issue = jira.issue(2)
    assert (issue.summary, adf.to_text(issue.description)) == ("Ship the parser", "Ship it.")
    assert set(issue.properties) == {"cotal-tasks"}
    assert (created["status"], created["statusSource"]) == ("open", "To Do")


async def test_a_refused_write_changes_nothing(jira: FakeJira, jr: JiraEndpoint) -> None:
    await imported(jr)
    before = await jr.get(1)
    jira.refuse_writes(403, "You do not have permission to assign issues.")
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.PERMISSION_DENIED)
    assert error.outcome == "not-executed"
    assert await jr.get(1) == before


@pytest.mark.parametrize(
    ("status", "resolution", "source"),
    [("done", "Done", "Done"), ("dropped", "Won't Do", "Done/Won't Do")],
)
async def test_create_task_done_or_dropped_transitions_the_new_issue(
    jira: FakeJira, jr: JiraEndpoint, status: str, resolution: str, source: str
) -> None:
    created = await jr.client.create("Already handled", status=status)
    issue = jira.issue(1)
    assert (issue.status, issue.resolution) == ("Done", resolution)
    assert (created["status"], created["statusSource"]) == (status, source)


async def test_jiras_own_refusal_is_named_with_its_remedy(jira: FakeJira, jr: JiraEndpoint) -> None:
    (issue,) = await imported(jr)
    jira.assignable.discard(SEAT_ACCOUNT)  # the seat's account may not be assigned here
    error = await refused(jr.client.claim(BUILDER, task_id(1)), ErrorCode.FAILED_PRECONDITION)
    assert f"assignee: User '{SEAT_ACCOUNT}' cannot be assigned issues." in error.message
    assert "Fix what the tracker names" in error.message
    assert error.outcome == "not-executed"
    assert (issue.assignee, issue.status) == (None, "To Do")


async def test_done_then_dropped_edits_the_resolution_in_place(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    (issue,) = await imported(jr)
    await jr.client.administer(task_id(1), status="done")
    mark = len(jira.requests)
    dropped = await jr.client.administer(task_id(1), status="dropped")
    assert writes(jira, mark) == [("PUT", "DEMO-1")]
    assert (issue.status, issue.resolution) == ("Done", "Won't Do")
    assert (dropped["status"], dropped["statusSource"]) == ("dropped", "Done/Won't Do")
