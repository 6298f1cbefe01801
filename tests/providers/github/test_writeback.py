"""Write-back: every command through the command service lands on GitHub as the
documented requests, the mirror records what GitHub took, the echo of the bridge's own
write changes nothing on the next poll, and a write GitHub refuses surfaces as a
``ContractError`` with its ``outcome`` while the mirror keeps the old record. The last
test does claim and update over the real Cotal wire."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.hosted.tracker import TrackedIssue
from tests.bridge._support import OPERATOR, DictPresence, bound_triple, triple
from tests.conftest import seat
from tests.providers.github._support import (
    BUILDER,
    ISSUES,
    REPO,
    SEAT_LOGIN,
    GitHubEndpoint,
    github_mesh,
    label_names,
    open_github,
    task_id,
)
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
WORKER = seat("worker", 4)  # a seat the directory does not map: no GitHub account
SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"


def writes(fake: FakeGitHub, since: int) -> list[tuple[str, str, Any]]:
    return [(r.method, r.path, unmarked(r.body)) for r in fake.requests[since:] if r.is_write]


async def synced(gh: GitHubEndpoint, *titles: str) -> None:
    for title in titles:
        gh.fake.add_issue(REPO, title)
        gh.fake.advance(10)
    await gh.poll()
    await gh.poll()  # settle the conditional request


async def assert_echo_is_quiet(gh: GitHubEndpoint, number: int) -> Json:
    """The next poll re-reads the issue the bridge wrote and changes nothing."""
    seq, record = await gh.seq(), await gh.get(number)
    gh.fake.advance(5)
    report = await gh.poll()
    assert report.issues >= 1, "the write did not move the issue's updated_at"
    assert report.changed == 0
    assert await gh.seq() == seq
    assert await gh.get(number) == record
    return record


# -- create-task -------------------------------------------------------------------------


async def test_create_task_creates_an_issue(gh: GitHubEndpoint) -> None:
    await synced(gh)
    mark = len(gh.fake.requests)

    created = await gh.client.create("Write the GitHub docs", brief="Token scopes, webhooks.")

    assert writes(gh.fake, mark) == [
        ("POST", ISSUES, {"title": "Write the GitHub docs", "body": "Token scopes, webhooks."})
    ]
    issue = gh.fake.issue(REPO, 1)
    assert (issue.title, unmarked(issue.body), issue.state, issue.user) == (
        "Write the GitHub docs",
        "Token scopes, webhooks.",
        "open",
        gh.fake.login,
    )
    assert created["taskId"] == task_id(1) == "octo-org/hello-world#1"
    assert (created["status"], created["statusSource"]) == ("open", "open")
    assert created["createdAt"] == issue.created_at * 1000
    assert await gh.get(1) == created
    await assert_echo_is_quiet(gh, 1)


@pytest.mark.parametrize(
    ("status", "reason", "source"),
    [("done", "completed", "closed"), ("dropped", "not_planned", "closed/not_planned")],
)
async def test_create_task_terminal_closes_the_new_issue(
    gh: GitHubEndpoint, status: str, reason: str, source: str
) -> None:
    await synced(gh)
    mark = len(gh.fake.requests)
    created = await gh.client.create("Already handled", status=status)
    assert writes(gh.fake, mark) == [
        ("POST", ISSUES, {"title": "Already handled"}),
        ("PATCH", f"{ISSUES}/1", {"state": "closed", "state_reason": reason}),
    ]
    assert (gh.fake.issue(REPO, 1).state, gh.fake.issue(REPO, 1).state_reason) == (
        "closed",
        reason,
    )
    assert (created["status"], created["statusSource"]) == (status, source)
    await assert_echo_is_quiet(gh, 1)


async def test_create_task_with_evidence_posts_one_comment(gh: GitHubEndpoint) -> None:
    await synced(gh)
    mark = len(gh.fake.requests)
    created = await gh.client.create("Has a run", evidence=[{"kind": "run", "ref": "run-41"}])
    assert writes(gh.fake, mark) == [
        ("POST", ISSUES, {"title": "Has a run"}),
        ("POST", f"{ISSUES}/1/comments", {"body": "Evidence:\n- run: run-41"}),
    ]
    assert [(e["kind"], e["ref"]) for e in created["evidence"]] == [("run", "run-41")]
    await assert_echo_is_quiet(gh, 1)


# -- claim-task and bind-task ------------------------------------------------------------


async def test_claim_by_a_mapped_seat_assigns_its_login_and_labels(gh: GitHubEndpoint) -> None:
    await synced(gh, "Ship the parser")
    gh.presence.put(BUILDER, environment="k8s://cluster-a/ns/team-7")
    mark = len(gh.fake.requests)

    claimed = await gh.client.claim(BUILDER, task_id(1))

    assert writes(gh.fake, mark) == [
        ("POST", f"{ISSUES}/1/assignees", {"assignees": [SEAT_LOGIN]}),
        ("POST", f"{ISSUES}/1/labels", {"labels": ["in-progress"]}),
    ]
    assert gh.fake.issue(REPO, 1).assignees == [SEAT_LOGIN]
    assert label_names(gh.fake, 1) == ["in-progress"]
    assert (claimed["status"], claimed["statusSource"]) == ("claimed", "in-progress")
    assert bound_triple(claimed) == triple(BUILDER)
    assert claimed["binding"]["boundBy"] == BUILDER.principal
    assert claimed["binding"]["environment"] == "k8s://cluster-a/ns/team-7"
    assert await assert_echo_is_quiet(gh, 1) == claimed


async def test_claim_by_an_unmapped_seat_only_labels(gh: GitHubEndpoint) -> None:
    await synced(gh, "Ship the parser")
    mark = len(gh.fake.requests)
    claimed = await gh.client.claim(WORKER, task_id(1))
    assert writes(gh.fake, mark) == [("POST", f"{ISSUES}/1/labels", {"labels": ["in-progress"]})]
    assert gh.fake.issue(REPO, 1).assignees == []
    assert bound_triple(claimed) == triple(WORKER)
    await assert_echo_is_quiet(gh, 1)


async def test_bind_task_assigns_the_target_seat(gh: GitHubEndpoint) -> None:
    await synced(gh, "Ship the parser")
    gh.presence.put(BUILDER, environment=None)
    mark = len(gh.fake.requests)
    bound = await gh.client.bind(BUILDER, task_id(1), mode="any")
    assert writes(gh.fake, mark) == [
        ("POST", f"{ISSUES}/1/assignees", {"assignees": [SEAT_LOGIN]}),
        ("POST", f"{ISSUES}/1/labels", {"labels": ["in-progress"]}),
    ]
    assert bound_triple(bound) == triple(BUILDER)
    assert bound["binding"]["boundBy"] == OPERATOR.principal
    await assert_echo_is_quiet(gh, 1)


# -- update-task -------------------------------------------------------------------------


async def claimed_by_builder(gh: GitHubEndpoint) -> Json:
    await synced(gh, "Ship the parser")
    return await gh.client.claim(BUILDER, task_id(1))


async def test_update_blocked_swaps_the_labels(gh: GitHubEndpoint) -> None:
    claimed = await claimed_by_builder(gh)
    mark = len(gh.fake.requests)
    blocked = await gh.client.update(BUILDER, task_id(1), status="blocked")
    assert writes(gh.fake, mark) == [
        ("POST", f"{ISSUES}/1/labels", {"labels": ["blocked"]}),
        ("DELETE", f"{ISSUES}/1/labels/in-progress", None),
    ]
    assert label_names(gh.fake, 1) == ["blocked"]
    assert (blocked["status"], blocked["statusSource"]) == ("blocked", "blocked")
    assert blocked["binding"] == claimed["binding"]
    await assert_echo_is_quiet(gh, 1)


@pytest.mark.parametrize(
    ("status", "reason", "source"),
    [("done", "completed", "closed"), ("dropped", "not_planned", "closed/not_planned")],
)
async def test_update_terminal_closes_with_the_reason(
    gh: GitHubEndpoint, status: str, reason: str, source: str
) -> None:
    claimed = await claimed_by_builder(gh)
    mark = len(gh.fake.requests)
    closed = await gh.client.update(BUILDER, task_id(1), status=status)
    assert writes(gh.fake, mark) == [
        ("DELETE", f"{ISSUES}/1/labels/in-progress", None),
        ("PATCH", f"{ISSUES}/1", {"state": "closed", "state_reason": reason}),
    ]
    issue = gh.fake.issue(REPO, 1)
    assert (issue.state, issue.state_reason, issue.assignees) == ("closed", reason, [SEAT_LOGIN])
    assert (closed["status"], closed["statusSource"]) == (status, source)
    assert closed["binding"] == claimed["binding"]  # who finished it stays on record
    await assert_echo_is_quiet(gh, 1)


async def test_a_note_and_evidence_become_one_comment(gh: GitHubEndpoint) -> None:
    await claimed_by_builder(gh)
    mark = len(gh.fake.requests)
    updated = await gh.client.update(
        BUILDER,
        task_id(1),
        note="Waiting on review.",
        evidence=[{"kind": "commit", "ref": SHA}, {"kind": "run", "ref": "ci/build 812"}],
    )
    assert writes(gh.fake, mark) == [
        (
            "POST",
            f"{ISSUES}/1/comments",
            {"body": f"Waiting on review.\n\n- commit: {SHA}\n- run: ci/build 812"},
        )
    ]
    assert [(e["kind"], e["ref"]) for e in updated["evidence"]] == [
        ("commit", SHA),
        ("run", "ci/build 812"),
    ]
    assert updated["status"] == "claimed"
    await assert_echo_is_quiet(gh, 1)


async def test_done_with_a_note_closes_and_comments_once(gh: GitHubEndpoint) -> None:
    await claimed_by_builder(gh)
    mark = len(gh.fake.requests)
    await gh.client.update(BUILDER, task_id(1), status="done", note="Merged.")
    assert [(m, p) for m, p, _ in writes(gh.fake, mark)] == [
        ("DELETE", f"{ISSUES}/1/labels/in-progress"),
        ("PATCH", f"{ISSUES}/1"),
        ("POST", f"{ISSUES}/1/comments"),
    ]
    assert [unmarked(c.body) for c in gh.fake.issue(REPO, 1).comments] == ["Merged."]
    await assert_echo_is_quiet(gh, 1)


# -- administer-task ---------------------------------------------------------------------


async def test_administer_unbind_unassigns_and_removes_the_label(gh: GitHubEndpoint) -> None:
    await claimed_by_builder(gh)
    mark = len(gh.fake.requests)
    freed = await gh.client.administer(task_id(1), unbind=True, note="Seat is gone.")
    assert writes(gh.fake, mark) == [
        ("DELETE", f"{ISSUES}/1/assignees", {"assignees": [SEAT_LOGIN]}),
        ("DELETE", f"{ISSUES}/1/labels/in-progress", None),
        ("POST", f"{ISSUES}/1/comments", {"body": "Seat is gone."}),
    ]
    issue = gh.fake.issue(REPO, 1)
    assert (issue.assignees, issue.labels) == ([], [])
    assert (freed["status"], freed["statusSource"]) == ("open", "open")
    assert "binding" not in freed
    await assert_echo_is_quiet(gh, 1)


async def test_administer_reopen_reopens_the_issue(gh: GitHubEndpoint) -> None:
    await claimed_by_builder(gh)
    await gh.client.update(BUILDER, task_id(1), status="done")
    mark = len(gh.fake.requests)
    reopened = await gh.client.administer(task_id(1), status="open", unbind=True)
    assert writes(gh.fake, mark) == [
        ("DELETE", f"{ISSUES}/1/assignees", {"assignees": [SEAT_LOGIN]}),
        ("PATCH", f"{ISSUES}/1", {"state": "open", "state_reason": "reopened"}),
    ]
    assert (gh.fake.issue(REPO, 1).state, gh.fake.issue(REPO, 1).state_reason) == (
        "open",
        "reopened",
    )
    assert (reopened["status"], reopened["statusSource"]) == ("open", "open")
    await assert_echo_is_quiet(gh, 1)


async def test_administer_dropped_on_a_done_task_survives_the_next_poll(
    gh: GitHubEndpoint,
) -> None:
    await claimed_by_builder(gh)
    await gh.client.update(BUILDER, task_id(1), status="done")
    dropped = await gh.client.administer(task_id(1), status="dropped")
    assert dropped["status"] == "dropped"
    gh.fake.advance(5)
    await gh.poll()
    assert (await gh.get(1))["status"] == "dropped"  # actual: done
    assert gh.fake.issue(REPO, 1).state_reason == "not_planned"


# -- echoes on both mirror backends ------------------------------------------------------


async def test_echoes_of_a_whole_lifecycle_change_nothing(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence, mirror_url: str
) -> None:
    presence.put(BUILDER, environment=None)
    async with open_github(
        fake, github_url, tmp_path / "b", presence=presence, database=mirror_url
    ) as gh:
        await synced(gh)
        created = await gh.client.create("Lifecycle", brief="From creation to done.")
        number = int(created["taskId"].rsplit("#", 1)[1])
        await assert_echo_is_quiet(gh, number)
        steps: list[tuple[str, dict[str, Any]]] = [
            ("claim", {}),
            ("update", {"status": "blocked", "note": "Waiting."}),
            ("update", {"status": "claimed", "evidence": [{"kind": "commit", "ref": SHA}]}),
            ("update", {"status": "done", "note": "Merged."}),
        ]
        for step, args in steps:
            if step == "claim":
                await gh.client.claim(BUILDER, created["taskId"])
            else:
                await gh.client.update(BUILDER, created["taskId"], **args)
            await assert_echo_is_quiet(gh, number)
        final = await gh.get(number)
        assert (final["status"], bound_triple(final)) == ("done", triple(BUILDER))
        assert [e["ref"] for e in final["evidence"]] == [SHA]
        history = await gh.store.history(created["taskId"])
        assert [h.command for h in history] == [
            "create-task",
            "claim-task",
            "update-task",
            "update-task",
            "update-task",
        ]


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [(422, ErrorCode.FAILED_PRECONDITION), (403, ErrorCode.PERMISSION_DENIED)],
)
async def test_refused_writes_surface_and_leave_the_mirror_alone(
    gh: GitHubEndpoint, status: int, code: ErrorCode
) -> None:
    await synced(gh, "To claim", "Claimed already")
    await gh.client.claim(BUILDER, task_id(2))
    seq = await gh.seq()
    before = [await gh.get(1), await gh.get(2)]
    issues = [gh.fake.issue(REPO, 1), gh.fake.issue(REPO, 2)]
    on_github = [(i.labels[:], i.assignees[:], i.state) for i in issues]
    gh.fake.refuse_writes(status)
    client = gh.client

    errors = [
        await client.refused(code, "create-task", OPERATOR, {"title": "Never created"}),
        await client.refused(code, "claim-task", BUILDER, {"taskId": task_id(1)}, mode="self"),
        await client.refused(
            code, "update-task", BUILDER, {"taskId": task_id(2), "status": "done"}, mode="self"
        ),
        await client.refused(
            code, "administer-task", OPERATOR, {"taskId": task_id(2), "unbind": True}
        ),
    ]

    assert all(e.outcome == "not-executed" for e in errors)
    assert all(f"GitHub answered {status}" in e.message for e in errors)
    assert await gh.seq() == seq
    assert [await gh.get(1), await gh.get(2)] == before
    assert len((await gh.client.list_tasks())["tasks"]) == 2
    assert [
        (i.labels, i.assignees, i.state) for i in (gh.fake.issue(REPO, 1), gh.fake.issue(REPO, 2))
    ] == on_github
    assert len(gh.fake.repos[REPO].issues) == 2
    gh.fake.allow_writes()
    report = await gh.poll()
    assert report.changed == 0


async def test_a_write_refused_halfway_says_executed_and_the_mirror_shows_it(
    gh: GitHubEndpoint,
) -> None:
    """The close is taken, the comment after it refused: the error says ``executed`` and
    the mirror shows the closed issue at once. A retry with the same envelope id posts
    only the comment: the issue is not closed a second time."""
    claimed = await claimed_by_builder(gh)
    gh.fake.fail_next(status=422, message="Body is too long", method="POST", path="*/comments")
    args = {"taskId": task_id(1), "status": "done", "note": "Merged."}

    with pytest.raises(ContractError) as refused:
        await gh.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-half")

    assert refused.value.code is ErrorCode.FAILED_PRECONDITION
    assert refused.value.outcome == "executed"  # the issue was closed before the comment
    assert gh.fake.issue(REPO, 1).state == "closed"
    shown = await gh.get(1)
    assert (shown["status"], shown["statusSource"]) == ("done", "closed")
    assert shown["binding"] == claimed["binding"]
    mark = len(gh.fake.requests)

    again = await gh.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-half")

    assert again["status"] == "done"
    assert [(m, p) for m, p, _ in writes(gh.fake, mark)] == [("POST", f"{ISSUES}/1/comments")]
    assert [unmarked(c.body) for c in gh.fake.issue(REPO, 1).comments] == ["Merged."]


async def test_a_seat_login_github_cannot_assign_refuses_the_claim(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    ghost = seat("ghost", 1)
    async with open_github(
        fake, github_url, tmp_path / "b", seats={"ghost-bot": ghost.principal}
    ) as gh:
        await synced(gh, "Nobody can take this")
        before, seq = await gh.get(1), await gh.seq()
        error = await gh.client.refused(
            ErrorCode.FAILED_PRECONDITION, "claim-task", ghost, {"taskId": task_id(1)}, mode="self"
        )
        assert "ghost-bot" in error.message
        assert await gh.get(1) == before
        assert await gh.seq() == seq
        assert (fake.issue(REPO, 1).assignees, fake.issue(REPO, 1).labels) == ([], [])


async def test_a_page_read_before_a_write_does_not_undo_the_write(gh: GitHubEndpoint) -> None:
    await synced(gh, "One", "Two")
    gh.fake.advance(30)
    gh.fake.add_labels(gh.fake.issue(REPO, 1), ["bug"], "octocat")
    gh.fake.add_labels(gh.fake.issue(REPO, 2), ["bug"], "octocat")
    upsert_page = gh.store.upsert_page
    claimed: list[Json] = []

    async def claim_then_upsert(issues: Sequence[TrackedIssue], read_mark: int | None) -> int:
        # A claim arrives after the poll read its page and before it mirrors it.
        if any(issue.number == 2 for issue in issues) and not claimed:
            claimed.append(await gh.client.claim(BUILDER, task_id(2)))
        return await upsert_page(issues, read_mark)

    setattr(gh.store, "upsert_page", claim_then_upsert)  # noqa: B010 - a test seam
    await gh.poll()
    setattr(gh.store, "upsert_page", upsert_page)  # noqa: B010

    record = await gh.get(2)
    assert record["status"] == "claimed"  # actual: open
    assert record["binding"] == claimed[0]["binding"]  # actual: no binding


# -- over the wire -----------------------------------------------------------------------


async def test_claim_and_update_over_the_wire_write_back(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    fake.add_issue(REPO, "Ship the parser")
    async with github_mesh(tmp_path, fake, github_url, seats={SEAT_LOGIN: "local.w"}) as mesh:
        worker = mesh.caller("w")
        claimed = await worker.ok("claim-task", {"taskId": task_id(1)}, mode="self")
        assert claimed["status"] == "claimed"
        assert (fake.issue(REPO, 1).assignees, label_names(fake, 1)) == (
            [SEAT_LOGIN],
            ["in-progress"],
        )
        done = await worker.ok(
            "update-task",
            {
                "taskId": task_id(1),
                "status": "done",
                "note": "Shipped.",
                "evidence": [{"kind": "commit", "ref": SHA}],
            },
            mode="self",
        )
        issue = fake.issue(REPO, 1)
        assert (issue.state, issue.state_reason, issue.labels) == ("closed", "completed", [])
        assert [unmarked(c.body) for c in issue.comments] == [f"Shipped.\n\n- commit: {SHA}"]
        assert (done["status"], done["statusSource"]) == ("done", "closed")
        # A refusal crosses the wire with its code and outcome.
        fake.refuse_writes(403)
        reply = await worker.call(
            "update-task", {"taskId": task_id(1), "note": "One more thing."}, mode="self"
        )
        assert not reply["ok"]
        assert (reply["error"]["code"], reply["error"]["outcome"]) == (
            "permission-denied",
            "not-executed",
        )
        reader = mesh.caller("reader")
        assert await reader.ok("get-task", {"taskId": task_id(1)}) == done
