"""Write-back to the fake GitLab, command by command, read from its request log and its
state: GitLab first, the mirror only once GitLab took the write. The echo of the bridge's
own writes changes nothing; a refused write is a ``ContractError`` with its ``outcome``
and leaves the mirror as it was."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from tests.bridge._support import OPERATOR, DictPresence
from tests.conftest import seat
from tests.providers.gitlab._support import (
    BLOCKED,
    BUILDER,
    CLAIMED,
    HUMAN,
    ISSUES,
    PROJECT,
    REVIEWER,
    SEAT_USER,
    WONT_DO,
    GitLabEndpoint,
    labels_of,
    task_id,
    writes_to,
)
from tests.providers.hosted_support import REFUSED_WRITES
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
WORKER = seat("worker", 5)  # a seat with no GitLab account


def body(request: RecordedRequest) -> Json:
    assert isinstance(request.body, dict), request
    found: Json = unmarked(request.body)
    return found


def assignees(fake: FakeGitLab, iid: int) -> list[str]:
    return list(fake.issue(PROJECT, iid).assignees)


def user_id(fake: FakeGitLab, username: str) -> int:
    return fake.users[username].id


async def imported(gl: GitLabEndpoint, n: int = 3, **fields: Any) -> list[int]:
    """``n`` open issues, mirrored; their iids."""
    iids = []
    for k in range(n):
        gl.fake.advance(60)
        iids.append(int(gl.fake.add_issue(PROJECT, f"Issue {k + 1}", **fields)["iid"]))
    await gl.poll()
    return iids


async def claimed_issue(gl: GitLabEndpoint) -> int:
    """One open issue, mirrored and claimed by ``BUILDER``; its iid."""
    (iid,) = await imported(gl, 1)
    await gl.client.claim(BUILDER, task_id(iid))
    return iid


async def written(
    gl: GitLabEndpoint, iid: int, command: Awaitable[Json]
) -> tuple[RecordedRequest, Json]:
    """Runs ``command`` (a call not yet awaited): the one write it made to issue ``iid``,
    and the record it answered."""
    mark = len(gl.fake.requests)
    record = await command
    (write,) = writes_to(gl.fake, iid, mark)
    return write, record


async def updated(gl: GitLabEndpoint, iid: int, **changes: Any) -> tuple[RecordedRequest, Json]:
    """``BUILDER`` updates issue ``iid``'s task (``written``)."""
    return await written(gl, iid, gl.client.update(BUILDER, task_id(iid), **changes))


@pytest.fixture(autouse=True)
def seats_present(presence: DictPresence) -> None:
    for who in (BUILDER, REVIEWER, WORKER):
        presence.put(who, environment=None)


# -- create ------------------------------------------------------------------------------


async def test_create_task_creates_an_issue_named_by_its_reference(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    await imported(gl, 2)
    mark = len(fake.requests)

    created = await gl.client.create("Ship the parser", brief="Ship it.")

    assert created["taskId"] == task_id(3)
    assert (created["status"], created["statusSource"]) == ("open", "opened")
    assert "binding" not in created
    (post,) = [r for r in fake.requests[mark:] if r.is_write]
    assert post.method == "POST"
    assert post.path == ISSUES
    assert body(post) == {"title": "Ship the parser", "description": "Ship it."}
    issue = fake.issue(PROJECT, 3)
    assert (issue.title, unmarked(issue.description), issue.state) == (
        "Ship the parser",
        "Ship it.",
        "opened",
    )
    assert issue.author == fake.username
    assert await gl.get(3) == created


@pytest.mark.parametrize(
    ("status", "labels", "source"),
    [("done", [], "closed"), ("dropped", [WONT_DO], WONT_DO)],
)
async def test_create_task_done_or_dropped_creates_a_closed_issue(
    gl: GitLabEndpoint, status: str, labels: list[str], source: str
) -> None:
    fake = gl.fake
    created = await gl.client.create("Already handled", status=status)
    iid = int(created["taskId"].rsplit("#", 1)[1])
    assert (created["status"], created["statusSource"]) == (status, source)
    issue = fake.issue(PROJECT, iid)
    assert issue.state == "closed"
    assert issue.labels == labels
    post, put = fake.writes
    assert body(post).get("labels", "") == ",".join(labels)
    assert body(put) == {"state_event": "close"}


async def test_create_task_with_evidence_posts_one_note(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    created = await gl.client.create(
        "With a run", evidence=[{"kind": "run", "ref": "https://ci.example/run/41"}]
    )
    iid = int(created["taskId"].rsplit("#", 1)[1])
    assert [(e["kind"], e["ref"]) for e in created["evidence"]] == [
        ("run", "https://ci.example/run/41")
    ]
    (note,) = [n for n in fake.issue(PROJECT, iid).notes if not n.system]
    assert unmarked(note.body) == "Evidence:\n- run: https://ci.example/run/41"
    assert [r.method for r in fake.writes] == ["POST", "POST"]


# -- claim, bind, update, administer -----------------------------------------------------


async def test_claim_assigns_the_seats_account_and_adds_the_claimed_label(
    gl: GitLabEndpoint,
) -> None:
    fake = gl.fake
    (iid,) = await imported(gl, 1, assignees=[HUMAN])

    put, claimed = await written(gl, iid, gl.client.claim(BUILDER, task_id(iid)))

    assert put.method == "PUT"
    # GitLab replaces the whole list: the human assignee read first is kept.
    assert sorted(body(put)["assignee_ids"]) == sorted(
        [user_id(fake, HUMAN), user_id(fake, SEAT_USER)]
    )
    assert body(put)["add_labels"] == CLAIMED
    assert sorted(assignees(fake, iid)) == sorted([HUMAN, SEAT_USER])
    assert labels_of(fake, iid) == [CLAIMED]
    assert fake.calls("GET", "/api/v4/users")[0].query == {"username": SEAT_USER}
    assert (claimed["status"], claimed["statusSource"]) == ("claimed", CLAIMED)
    assert claimed["binding"]["lifecycleUid"] == BUILDER.lifecycleUid
    assert claimed["binding"]["boundBy"] == BUILDER.principal
    assert await gl.get(iid) == claimed


async def test_bind_by_an_operator_assigns_the_target_seats_account(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    (iid,) = await imported(gl, 1)

    put, bound = await written(gl, iid, gl.client.bind(REVIEWER, task_id(iid)))

    assert body(put)["assignee_ids"] == [user_id(fake, "reviewer-bot")]
    assert body(put)["add_labels"] == CLAIMED
    assert assignees(fake, iid) == ["reviewer-bot"]
    assert bound["status"] == "claimed"
    assert bound["binding"]["actor"] == REVIEWER.actor
    assert bound["binding"]["boundBy"] == OPERATOR.principal


async def test_a_seat_without_an_account_gets_the_label_only(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    (iid,) = await imported(gl, 1)

    put, claimed = await written(gl, iid, gl.client.claim(WORKER, task_id(iid)))

    assert body(put) == {"add_labels": CLAIMED}
    assert assignees(fake, iid) == []
    assert claimed["binding"]["actor"] == WORKER.actor
    # The echo does not unbind it: the binding lives in the mirror.
    await gl.poll()
    assert await gl.get(iid) == claimed


async def test_update_blocked_then_done(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = await claimed_issue(gl)

    put, blocked = await updated(gl, iid, status="blocked")

    assert body(put) == {"add_labels": BLOCKED, "remove_labels": CLAIMED}
    assert labels_of(fake, iid) == [BLOCKED]
    assert (blocked["status"], blocked["statusSource"]) == ("blocked", BLOCKED)

    put, done = await updated(gl, iid, status="done")

    assert body(put) == {"remove_labels": BLOCKED, "state_event": "close"}
    issue = fake.issue(PROJECT, iid)
    assert (issue.state, issue.labels, issue.closed_by) == ("closed", [], fake.username)
    assert (done["status"], done["statusSource"]) == ("done", "closed")
    assert done["binding"] == blocked["binding"]  # who finished it stays on the record
    assert assignees(fake, iid) == [SEAT_USER]


async def test_update_dropped_closes_with_the_dropped_label(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = await claimed_issue(gl)

    put, dropped = await updated(gl, iid, status="dropped")

    assert body(put) == {"add_labels": WONT_DO, "remove_labels": CLAIMED, "state_event": "close"}
    issue = fake.issue(PROJECT, iid)
    assert (issue.state, issue.labels) == ("closed", [WONT_DO])
    assert (dropped["status"], dropped["statusSource"]) == ("dropped", WONT_DO)


async def test_a_note_and_evidence_become_one_note(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = await claimed_issue(gl)

    post, record = await updated(
        gl,
        iid,
        note="Pushed the fix.",
        evidence=[{"kind": "commit", "ref": "9f2c1e7"}, {"kind": "branch", "ref": "fix/parser"}],
    )

    assert (post.method, post.path) == ("POST", f"{ISSUES}/{iid}/notes")
    assert body(post) == {"body": "Pushed the fix.\n\n- commit: 9f2c1e7\n- branch: fix/parser"}
    assert [unmarked(n.body) for n in fake.issue(PROJECT, iid).notes if not n.system] == [
        "Pushed the fix.\n\n- commit: 9f2c1e7\n- branch: fix/parser"
    ]
    assert [(e["kind"], e["ref"]) for e in record["evidence"]] == [
        ("commit", "9f2c1e7"),
        ("branch", "fix/parser"),
    ]
    assert record["status"] == "claimed"


async def test_a_new_brief_edits_the_description(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = await claimed_issue(gl)
    put, _ = await updated(gl, iid, brief="Now with a plan.")
    assert body(put) == {"description": "Now with a plan."}
    assert fake.issue(PROJECT, iid).description == "Now with a plan."


async def test_administer_unbind_unassigns_and_removes_the_labels(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    (iid,) = await imported(gl, 1, assignees=[HUMAN])
    await gl.client.claim(BUILDER, task_id(iid))
    await gl.client.update(BUILDER, task_id(iid), status="blocked")
    mark = len(fake.requests)

    freed = await gl.client.administer(task_id(iid), unbind=True, note="Seat is gone.")

    puts = [r for r in writes_to(fake, iid, mark) if r.method == "PUT"]
    (put,) = puts
    assert body(put)["assignee_ids"] == [user_id(fake, HUMAN)]  # the human stays
    assert body(put)["remove_labels"] == BLOCKED
    assert assignees(fake, iid) == [HUMAN]
    assert labels_of(fake, iid) == []
    notes = [unmarked(n.body) for n in fake.issue(PROJECT, iid).notes if not n.system]
    assert notes == ["Seat is gone."]
    assert (freed["status"], freed["statusSource"]) == ("open", "opened")
    assert "binding" not in freed


async def test_administer_reopens_a_closed_issue(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    iid = await claimed_issue(gl)
    await gl.client.update(BUILDER, task_id(iid), status="dropped")

    put, reopened = await written(
        gl, iid, gl.client.administer(task_id(iid), status="open", unbind=True)
    )

    assert body(put)["state_event"] == "reopen"
    assert body(put)["remove_labels"] == WONT_DO
    assert body(put)["assignee_ids"] == []
    issue = fake.issue(PROJECT, iid)
    assert (issue.state, issue.labels, issue.assignees) == ("opened", [], [])
    assert (reopened["status"], reopened["statusSource"]) == ("open", "opened")


async def test_echoes_of_the_bridges_own_writes_change_nothing(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    a, b, c = await imported(gl, 3)
    await gl.client.claim(BUILDER, task_id(a))
    await gl.client.update(BUILDER, task_id(a), status="blocked", note="Waiting.")
    await gl.client.bind(REVIEWER, task_id(b))
    await gl.client.update(
        REVIEWER, task_id(b), status="done", evidence=[{"kind": "commit", "ref": "abc1234"}]
    )
    await gl.client.claim(WORKER, task_id(c))
    await gl.client.administer(task_id(c), unbind=True)
    created = await gl.client.create("Fresh", brief="From the board.")
    records = {t["taskId"]: await gl.client.get(t["taskId"]) for t in await gl.all_tasks()}
    seq = await gl.seq()
    mark = len(fake.requests)
    heard: list[int] = []
    gl.endpoint.service.add_listener(lambda change, _at: _record(heard, change))

    report = await gl.poll()

    assert report.issues >= 4  # every written issue was read back
    assert report.changed == 0
    assert await gl.seq() == seq
    assert heard == []  # no board-changed
    assert [r for r in fake.requests[mark:] if r.is_write] == []
    assert {t["taskId"]: await gl.client.get(t["taskId"]) for t in await gl.all_tasks()} == records
    assert records[created["taskId"]]["brief"] == "From the board."


async def _record(heard: list[int], change: int) -> None:
    heard.append(change)


# -- refusals ----------------------------------------------------------------------------


@REFUSED_WRITES
async def test_a_refused_write_is_an_error_with_outcome_and_the_mirror_unchanged(
    gl: GitLabEndpoint, status: int, code: ErrorCode
) -> None:
    fake = gl.fake
    (iid,) = await imported(gl, 1)
    before, seq = await gl.get(iid), await gl.seq()
    fake.refuse_writes(status)

    with pytest.raises(ContractError) as refused:
        await gl.client.claim(BUILDER, task_id(iid))

    assert refused.value.code is code
    assert refused.value.outcome == "not-executed"
    assert "GitLab answered" in refused.value.message
    assert fake.token not in refused.value.message
    assert await gl.get(iid) == before
    assert await gl.seq() == seq
    assert (assignees(fake, iid), labels_of(fake, iid)) == ([], [])

    with pytest.raises(ContractError) as refused_create:
        await gl.client.create("Not today")
    assert refused_create.value.code is code
    assert refused_create.value.outcome == "not-executed"
    assert len(await gl.all_tasks()) == 1
    assert await gl.seq() == seq
    assert len(fake.project(PROJECT).issues) == 1


async def test_a_write_half_taken_is_executed_and_the_mirror_shows_what_gitlab_holds(
    gl: GitLabEndpoint,
) -> None:
    """The PUT that closes the issue is taken, the note after it refused: the error says
    ``executed`` and the mirror reads the closed issue at once; the poll agrees."""
    fake = gl.fake
    (iid,) = await imported(gl, 1)
    claimed = await gl.client.claim(BUILDER, task_id(iid))
    seq = await gl.seq()
    fake.fail_next(status=422, method="POST", path=f"{ISSUES}/{iid}/notes")

    with pytest.raises(ContractError) as refused:
        await gl.client.update(BUILDER, task_id(iid), status="done", note="Merged.")

    assert refused.value.code is ErrorCode.FAILED_PRECONDITION
    assert refused.value.outcome == "executed"
    shown = await gl.get(iid)
    assert (shown["status"], shown["statusSource"]) == ("done", "closed")
    assert await gl.seq() == seq + 1
    assert fake.issue(PROJECT, iid).state == "closed"

    await gl.poll()

    record = await gl.get(iid)
    assert (record["status"], record["statusSource"]) == ("done", "closed")
    assert record["binding"] == claimed["binding"]
