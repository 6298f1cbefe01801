"""Jira writes that cannot apply twice: two instances of one Jira endpoint share a
PostgreSQL mirror; the first dies after Jira took a write (no mirror commit, its lease
left to expire), and the caller's retry with the same envelope id on the second instance
reconciles against Jira through the write's mark (an entity property of the comment or
the issue) instead of writing again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.jira import adf
from cotal_tasks.providers.store import Committed
from tests.bridge._support import DictPresence
from tests.providers.jira._support import BUILDER, SEARCH, JiraEndpoint, open_jira, task_id
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

SHORT_LEASE_MS = 300


class Crash(Exception):
    """Stands in for the process dying at this point."""


@pytest.fixture
async def pair(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence, postgres_database: str
) -> AsyncIterator[tuple[JiraEndpoint, JiraEndpoint]]:
    presence.put(BUILDER, environment=None)
    async with AsyncExitStack() as stack:
        ends = []
        for name in ("a", "b"):
            end = await stack.enter_async_context(
                open_jira(
                    jira, jira_url, tmp_path / name, presence=presence, database=postgres_database
                )
            )
            end.store.writes.lease_ms = SHORT_LEASE_MS
            ends.append(end)
        yield ends[0], ends[1]


def crash(end: JiraEndpoint, monkeypatch: pytest.MonkeyPatch, at: str = "_mirror") -> None:
    writes = end.store.writes

    async def die(*args: Any) -> Committed:
        raise Crash

    async def keep(name: str, holder: str) -> None:
        return None

    target = writes.ledger if at == "located" else writes
    monkeypatch.setattr(target, at, die)
    monkeypatch.setattr(writes.leases, "release", keep)


def jira_writes(fake: FakeJira, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests[since:] if r.is_write]


async def test_a_retried_update_after_a_crash_comments_and_closes_once(
    pair: tuple[JiraEndpoint, JiraEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    a.fake.add_issue(PROJECT, "Ship the parser")
    await a.poll()
    await a.client.claim(BUILDER, task_id(1))
    args = {"taskId": task_id(1), "status": "done", "note": "Merged."}
    crash(a, monkeypatch)
    with pytest.raises(Crash):
        await a.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-1")
    issue = a.fake.issue(1)
    assert (issue.status, len(issue.comments)) == ("Done", 1)
    mark = len(b.fake.requests)
    done = await b.client.call("update-task", BUILDER, args, mode="self", envelope_id="e-1")
    assert done["status"] == "done"
    assert jira_writes(b.fake, mark) == []  # reconciled: Jira had it all
    assert [adf.to_text(c.body) for c in issue.comments] == ["Merged."]


async def test_a_retried_create_found_by_its_mark_makes_one_issue(
    pair: tuple[JiraEndpoint, JiraEndpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    args = {"title": "Write the runbook", "brief": "Failover first."}
    crash(a, monkeypatch, at="located")  # dies before it knows the issue's key
    with pytest.raises(Crash):
        await a.client.call("create-task", BUILDER, args, envelope_id="e-create")
    assert len(a.fake.issues) == 1
    mark = len(b.fake.requests)
    created = await b.client.call("create-task", BUILDER, args, envelope_id="e-create")
    assert created["taskId"] == task_id(1)
    assert jira_writes(b.fake, mark) == []
    assert len(b.fake.issues) == 1
    (search,) = [r for r in b.fake.requests[mark:] if r.path == SEARCH]
    assert search.body["properties"] == ["cotal-tasks"]
    assert "created >= " in search.body["jql"]
