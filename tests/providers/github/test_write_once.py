"""Tracker writes that cannot apply twice.

Two instances of one GitHub endpoint share a PostgreSQL mirror. The first crashes
between the tracker write and the mirror commit (a fault hook stands in for the kill: the
write's lease is left behind, as a dead process leaves it); the caller retries the same
envelope id on the second instance, which reconciles against GitHub (the write carries
a mark of its envelope id) instead of writing again: GitHub shows exactly one effect.
A mirror conflict after the tracker write is settled in the mirror, never by writing
GitHub again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import Task
from cotal_tasks.providers.store import Committed, RevisionConflict, Write
from tests.bridge._support import DictPresence
from tests.providers.github._support import (
    BUILDER,
    ISSUES,
    REPO,
    GitHubEndpoint,
    open_github,
    task_id,
)
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
SHORT_LEASE_MS = 300


class Crash(Exception):
    """Stands in for the process dying at this point."""


@pytest.fixture
async def pair(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    presence: DictPresence,
    postgres_database: str,
) -> AsyncIterator[tuple[GitHubEndpoint, GitHubEndpoint]]:
    presence.put(BUILDER, environment=None)
    async with AsyncExitStack() as stack:
        ends = []
        for name in ("a", "b"):
            end = await stack.enter_async_context(
                open_github(
                    fake,
                    github_url,
                    tmp_path / name,
                    presence=presence,
                    database=postgres_database,
                )
            )
            end.store.writes.lease_ms = SHORT_LEASE_MS
            ends.append(end)
        yield ends[0], ends[1]


def crash_after_the_tracker(end: GitHubEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance dies once the tracker took the write: no mirror commit, and the lease
    on the task is never released (it expires)."""
    writes = end.store.writes

    async def die(final: Task, write: Write) -> Committed:
        raise Crash

    async def keep(name: str, holder: str) -> None:
        return None

    monkeypatch.setattr(writes, "_mirror", die)
    monkeypatch.setattr(writes.leases, "release", keep)


async def claimed(end: GitHubEndpoint) -> None:
    end.fake.add_issue(REPO, "Ship the parser")
    await end.poll()
    await end.client.claim(BUILDER, task_id(1))


def tracker_writes(fake: FakeGitHub, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests[since:] if r.is_write]


async def test_a_retry_on_another_instance_after_a_crash_comments_once(
    pair: tuple[GitHubEndpoint, GitHubEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    await claimed(a)
    args = {"taskId": task_id(1), "status": "done", "note": "Merged."}
    crash_after_the_tracker(a, monkeypatch)

    with pytest.raises(Crash):
        await a.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-1")
    assert a.fake.issue(REPO, 1).state == "closed"
    assert len(a.fake.issue(REPO, 1).comments) == 1
    mark = len(b.fake.requests)

    done = await b.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-1")

    assert done["status"] == "done"
    assert tracker_writes(b.fake, mark) == []  # reconciled: GitHub had it all
    assert [unmarked(c.body) for c in b.fake.issue(REPO, 1).comments] == ["Merged."]
    assert await b.get(1) == done == await a.get(1)
    again = await b.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-1")
    assert again == done  # the recorded result, from either instance
    assert tracker_writes(b.fake, mark) == []


async def test_a_retried_create_after_a_crash_makes_one_issue(
    pair: tuple[GitHubEndpoint, GitHubEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    args = {"title": "Write the runbook", "brief": "Failover first."}
    crash_after_the_tracker(a, monkeypatch)

    with pytest.raises(Crash):
        await a.client.call("create-task", BUILDER, args, envelope_id="e-create")
    assert len(a.fake.repos[REPO].issues) == 1
    mark = len(b.fake.requests)

    created = await b.client.call("create-task", BUILDER, args, envelope_id="e-create")

    assert created["taskId"] == task_id(1)
    assert created["brief"] == "Failover first."
    assert tracker_writes(b.fake, mark) == []
    assert len(b.fake.repos[REPO].issues) == 1
    assert unmarked(b.fake.issue(REPO, 1).body) == "Failover first."


async def test_a_retried_create_whose_issue_was_deleted_meanwhile_makes_it_again(
    pair: tuple[GitHubEndpoint, GitHubEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier attempt's issue answers 410 now: that is no answer to this create, so
    the retry makes the issue again instead of writing to a deleted one."""
    a, b = pair
    args = {"title": "Write the runbook", "brief": "Failover first."}
    crash_after_the_tracker(a, monkeypatch)
    with pytest.raises(Crash):
        await a.client.call("create-task", BUILDER, args, envelope_id="e-gone")
    a.fake.delete_issue(REPO, 1)

    created = await b.client.call("create-task", BUILDER, args, envelope_id="e-gone")

    assert (created["taskId"], created["status"]) == (task_id(2), "open")
    assert created["brief"] == "Failover first."
    assert unmarked(b.fake.issue(REPO, 2).body) == "Failover first."


async def test_a_retried_create_finds_its_issue_behind_a_hundred_newer_ones(
    pair: tuple[GitHubEndpoint, GitHubEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the retry looked for its earlier attempt among the 100 newest issues only:
    on a busy repository (150 issues created while the lease ran out) it created again."""
    a, b = pair
    args = {"title": "Write the runbook", "brief": "Failover first."}
    crash_after_the_tracker(a, monkeypatch)

    async def die_unnumbered(*_: object) -> None:
        raise Crash  # before the ledger learns the issue's number: only its mark finds it

    monkeypatch.setattr(a.store.writes.ledger, "located", die_unnumbered)
    with pytest.raises(Crash):
        await a.client.call("create-task", BUILDER, args, envelope_id="e-busy")
    for n in range(150):
        a.fake.add_issue(REPO, f"someone else's issue {n}")

    created = await b.client.call("create-task", BUILDER, args, envelope_id="e-busy")

    assert created["taskId"] == task_id(1)
    assert len(b.fake.repos[REPO].issues) == 151  # the earlier attempt's, and no second


async def test_a_partly_applied_write_retried_applies_only_the_rest(
    pair: tuple[GitHubEndpoint, GitHubEndpoint],
) -> None:
    """The close went through, the comment was refused: the retry on the other instance
    posts the comment and does not touch the state again."""
    a, b = pair
    await claimed(a)
    a.fake.fail_next(status=502, method="POST", path="*/comments")
    a.fake.fail_next(status=502, method="POST", path="*/comments")
    a.tracker.client.http.max_retries = 1  # type: ignore[attr-defined]
    args = {"taskId": task_id(1), "status": "done", "note": "Merged."}

    with pytest.raises(Exception):  # noqa: B017, PT011 - refused after the close took effect
        await a.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-2")
    assert a.fake.issue(REPO, 1).state == "closed"
    mark = len(b.fake.requests)

    done = await b.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-2")

    assert done["status"] == "done"
    assert tracker_writes(b.fake, mark) == [("POST", f"{ISSUES}/1/comments")]
    assert [unmarked(c.body) for c in b.fake.issue(REPO, 1).comments] == ["Merged."]


async def test_a_mirror_conflict_after_the_tracker_write_never_writes_it_again(
    pair: tuple[GitHubEndpoint, GitHubEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    await claimed(a)
    mirror = a.store.writes.mirror
    real = mirror.commit
    conflicts = [RevisionConflict(task_id(1))]

    async def conflicting(write: Write) -> Committed:
        if conflicts and write.command == "update-task":
            raise conflicts.pop()  # the sync committed this task meanwhile
        return await real(write)

    monkeypatch.setattr(mirror, "commit", conflicting)
    mark = len(a.fake.requests)

    done = await a.client.update(BUILDER, task_id(1), status="done", note="Merged.")

    assert done["status"] == "done"
    assert conflicts == []
    assert [m for m, _ in tracker_writes(a.fake, mark)].count("POST") == 1  # one comment
    assert len(a.fake.issue(REPO, 1).comments) == 1
