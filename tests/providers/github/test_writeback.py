"""Write-back: every command through the command service lands on GitHub as the
documented requests, the mirror records what GitHub took, and the echo of the bridge's
own write changes nothing on the next poll. Refusals and the wire are in
``test_writeback_refusals.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.bridge._support import OPERATOR, DictPresence, bound_triple, triple
from tests.providers.github._support import (
    BUILDER,
    ISSUES,
    REPO,
    SEAT_LOGIN,
    GitHubEndpoint,
    label_names,
    open_github,
    task_id,
)
from tests.providers.github.writeback_support import (
    SHA,
    WORKER,
    assert_echo_is_quiet,
    claimed_by_builder,
    synced,
    writes,
)
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked

# A terminal status, the ``state_reason`` GitHub closes the issue with, the statusSource.
TERMINAL = pytest.mark.parametrize(
    ("status", "reason", "source"),
    [("done", "completed", "closed"), ("dropped", "not_planned", "closed/not_planned")],
)

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


@TERMINAL
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


@TERMINAL
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
