"""One poller per hosted endpoint: two instances of a GitHub endpoint on one PostgreSQL
mirror elect one sync leader; the follower serves the shared mirror, fresh; when the
leader dies (its lease is never released), the follower takes over within two poll
intervals and resumes from the checkpoint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from cotal_tasks.bridge.http.health import _probe as probe
from cotal_tasks.bridge.process.leader import Election
from cotal_tasks.bridge.wiring.http import served_endpoint
from tests.bridge._support import DictPresence
from tests.providers.github._support import REPO, GitHubEndpoint, open_github, task_id
from tests.support.fake_github import FakeGitHub
from tests.support.polling import eventually

INTERVAL_S = 0.5


@pytest.fixture
async def pair(
    fake: FakeGitHub, github_url: str, tmp_path: Path, postgres_database: str
) -> AsyncIterator[list[GitHubEndpoint]]:
    async with AsyncExitStack() as stack:
        ends = [
            await stack.enter_async_context(
                open_github(
                    fake,
                    github_url,
                    tmp_path / name,
                    presence=DictPresence(),
                    database=postgres_database,
                    poll_interval_s=INTERVAL_S,
                )
            )
            for name in ("a", "b")
        ]
        yield ends


def election(end: GitHubEndpoint) -> Election:
    return end.hosted.election


async def test_two_instances_elect_one_leader_and_fail_over(
    pair: list[GitHubEndpoint], fake: FakeGitHub
) -> None:
    a, b = pair
    stops = [asyncio.Event(), asyncio.Event()]
    runs = [asyncio.create_task(election(e).run(s)) for e, s in zip(pair, stops, strict=True)]
    try:

        async def one_leader() -> bool:
            roles = sorted(election(e).role for e in pair)
            return roles == ["follower", "leader"]

        await eventually(one_leader, within_s=10)
        leader = a if election(a).role == "leader" else b
        follower = b if leader is a else a
        fake.add_issue(REPO, "First")

        async def mirrored(number: int) -> bool:
            try:
                await follower.get(number)
            except Exception:
                return False
            return True

        await eventually(lambda: mirrored(1), within_s=10)

        async def follower_fresh() -> bool:
            return await follower.store.freshness() is None

        await eventually(follower_fresh, within_s=10)  # the leader's sync health, shared
        assert election(follower).role == "follower"
        health = [await probe(served_endpoint(e.endpoint), True) for e in (leader, follower)]
        assert [h["sync"]["role"] for h in health] == ["leader", "follower"]
        assert all(h["ready"] for h in health)  # a follower is ready: it serves reads

        dead = runs[pair.index(leader)]
        dead.cancel()  # the leader dies: its lease is left to expire
        await asyncio.gather(dead, return_exceptions=True)
        died = time.monotonic()
        mark = len(fake.requests)

        async def took_over() -> bool:
            return election(follower).role == "leader"

        await eventually(took_over, within_s=10)
        takeover_s = time.monotonic() - died
        print(f"\nsync leader takeover after the leader died: {takeover_s:.2f} s")
        # the follower tries every half interval; the lease lives 1.5 intervals
        assert election(follower).ttl_ms + INTERVAL_S * 500 <= 2 * INTERVAL_S * 1000

        fake.advance(10)
        fake.add_issue(REPO, "Second")
        await eventually(lambda: mirrored(2), within_s=10)
        listings = [
            r
            for r in fake.requests[mark:]
            if r.path == f"/repos/{REPO}/issues" and r.if_none_match is None
        ]
        assert listings, "the new leader listed the changes"
        assert all("since" in r.query for r in listings)  # resumed from the checkpoint
        assert (await follower.get(2))["taskId"] == task_id(2)
    finally:
        for stop in stops:
            stop.set()
        await asyncio.gather(*runs, return_exceptions=True)


async def test_a_clean_stop_hands_the_lease_over_at_once(pair: list[GitHubEndpoint]) -> None:
    a, b = pair
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    run_a = asyncio.create_task(election(a).run(stop_a))

    async def a_leads() -> bool:
        return election(a).role == "leader"

    await eventually(a_leads, within_s=10)
    run_b = asyncio.create_task(election(b).run(stop_b))
    try:
        stop_a.set()
        await run_a

        async def b_leads() -> bool:
            return election(b).role == "leader"

        await eventually(b_leads, within_s=10)
    finally:
        stop_b.set()
        await run_b
