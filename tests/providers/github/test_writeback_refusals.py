"""Write-back refused: a write GitHub refuses surfaces as a ``ContractError`` with its
``outcome`` while the mirror keeps the old record (or shows what was executed). The last
test does claim and update over the real Cotal wire."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.hosted.tracker import TrackedIssue
from tests.bridge._support import OPERATOR
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
from tests.providers.github.writeback_support import SHA, Json, claimed_by_builder, synced, writes
from tests.providers.hosted_support import REFUSED_WRITES
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked

# -- refusals ----------------------------------------------------------------------------


@REFUSED_WRITES
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
    mirror_page = gh.hosted.mirroring.mirror_page
    claimed: list[Json] = []

    async def claim_then_mirror(issues: Sequence[TrackedIssue], read_mark: int | None) -> Any:
        # A claim arrives after the poll read its page and before it mirrors it.
        if any(issue.number == 2 for issue in issues) and not claimed:
            claimed.append(await gh.client.claim(BUILDER, task_id(2)))
        return await mirror_page(issues, read_mark)

    setattr(gh.hosted.mirroring, "mirror_page", claim_then_mirror)  # noqa: B010 - a test seam
    await gh.poll()
    setattr(gh.hosted.mirroring, "mirror_page", mirror_page)  # noqa: B010

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
