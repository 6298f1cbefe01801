"""One poller per hosted endpoint: two instances of a GitHub endpoint on one PostgreSQL
mirror elect one sync leader; the follower serves the shared mirror, fresh; when the
leader dies (its lease is never released), the follower takes over within two poll
intervals and resumes from the checkpoint. A webhook delivered to either instance wakes
the leader's sync (over LISTEN/NOTIFY on the mirror), once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette

from cotal_tasks.bridge.http.health import _probe as probe
from cotal_tasks.bridge.http.webhooks import webhook_routes
from cotal_tasks.bridge.wiring.http import served_endpoint
from cotal_tasks.providers.hosted.leader import Election
from tests.bridge._support import DictPresence
from tests.conftest import _asyncpg_dsn
from tests.providers.github._support import (
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    GitHubEndpoint,
    fetched_issue_numbers,
    list_requests,
    open_github,
    task_id,
)
from tests.support.fake_github import FakeGitHub, issues_payload, signed_webhook
from tests.support.polling import eventually

INTERVAL_S = 0.5
LONG_INTERVAL_S = 30.0  # no poll happens while a wake test runs


@asynccontextmanager
async def instances(
    fake: FakeGitHub, github_url: str, tmp_path: Path, database: str, **overrides: Any
) -> AsyncIterator[list[GitHubEndpoint]]:
    """Two instances of the endpoint on one PostgreSQL mirror."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                open_github(
                    fake,
                    github_url,
                    tmp_path / name,
                    presence=DictPresence(),
                    database=database,
                    **overrides,
                )
            )
            for name in ("a", "b")
        ]


@pytest.fixture
async def pair(
    fake: FakeGitHub, github_url: str, tmp_path: Path, postgres_database: str
) -> AsyncIterator[list[GitHubEndpoint]]:
    async with instances(
        fake, github_url, tmp_path, postgres_database, poll_interval_s=INTERVAL_S
    ) as ends:
        yield ends


def election(end: GitHubEndpoint) -> Election:
    assert end.endpoint.sync_role is end.hosted.election
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
        listings = [r for r in fake.requests[mark:] if r.path == f"/repos/{REPO}/issues"]
        assert any(r.status == 200 for r in listings), "the new leader listed the changes"
        # resumed from the checkpoint: its page asked conditionally, or a window's since
        assert all(r.if_none_match is not None or "since" in r.query for r in listings)
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


@pytest.fixture
async def hooked_pair(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    postgres_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[GitHubEndpoint, GitHubEndpoint]]:
    """Two instances with a webhook secret and a 30 s poll, running their elections; the
    leader's first poll has mirrored issues 1 and 2. Yields (leader, follower)."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    for title in ("First", "Second"):
        fake.add_issue(REPO, title)
        fake.advance(10)
    async with instances(
        fake,
        github_url,
        tmp_path,
        postgres_database,
        poll_interval_s=LONG_INTERVAL_S,
        webhook_secret_env=SECRET_ENV,
    ) as pair:
        stop = asyncio.Event()
        runs = [asyncio.create_task(election(end).run(stop)) for end in pair]
        try:

            async def led_and_listening() -> bool:
                leaders = [e for e in pair if election(e).role == "leader"]
                listener = election(leaders[0]).listener if len(leaders) == 1 else None
                return listener is not None and listener.listening

            await eventually(led_and_listening, within_s=10, what="one leader, listening")
            leader = next(e for e in pair if election(e).role == "leader")
            follower = next(e for e in pair if e is not leader)
            await eventually(
                lambda: leader.store.health.last_success_ms is not None,
                within_s=10,
                what="the leader's first poll",
            )
            assert election(follower).role == "follower"
            yield leader, follower
        finally:
            stop.set()
            await asyncio.gather(*runs, return_exceptions=True)


async def deliver_closed(end: GitHubEndpoint, fake: FakeGitHub, number: int) -> httpx.Response:
    """Close issue ``number`` on the tracker and deliver its signed ``issues`` event to
    ``end``'s ``POST /webhooks/github`` route (as a load balancer might pick it)."""
    fake.advance(10)
    fake.close_issue(REPO, number)
    body, headers = signed_webhook(
        WEBHOOK_SECRET, "issues", issues_payload(fake, "closed", REPO, number)
    )
    assert end.hosted.webhook is not None
    app = Starlette(routes=webhook_routes([("github", [end.hosted.webhook])]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as http:
        return await http.post("/webhooks/github", content=body, headers=headers)


async def closed_in(end: GitHubEndpoint, number: int) -> bool:
    return bool((await end.get(number))["status"] == "done")


async def test_a_delivery_to_the_follower_wakes_the_leader(
    hooked_pair: tuple[GitHubEndpoint, GitHubEndpoint], fake: FakeGitHub
) -> None:
    """The follower's own sync loop is not running, so before the leader listened for
    wakes on the mirror this delivery waited for the leader's next poll (30 s away) and
    the issue stayed open here: this test failed against that code."""
    leader, follower = hooked_pair
    mark = len(fake.requests)

    answer = await deliver_closed(follower, fake, 1)
    assert answer.status_code == 202

    took = await eventually(lambda: closed_in(follower, 1), within_s=5, what="#1 mirrored done")
    print(f"\nwebhook to the follower -> issue mirrored by the leader: {took:.2f} s")
    assert took < 5 < LONG_INTERVAL_S
    assert fetched_issue_numbers(fake, mark) == [1]  # the leader's refresh, no poll
    assert list_requests(fake, mark) == []
    listener = election(leader).listener
    assert listener is not None
    assert listener.heard == 1
    assert election(follower).role == "follower"


async def test_the_leader_ignores_its_own_wake(
    hooked_pair: tuple[GitHubEndpoint, GitHubEndpoint], fake: FakeGitHub
) -> None:
    leader, follower = hooked_pair
    mark = len(fake.requests)

    assert (await deliver_closed(leader, fake, 1)).status_code == 202
    await eventually(lambda: closed_in(leader, 1), within_s=5, what="#1 mirrored done")
    # Notifications on one channel arrive in order: once the follower's wake for #2 is
    # handled, the leader's own wake for #1 was heard (and ignored) before it.
    assert (await deliver_closed(follower, fake, 2)).status_code == 202
    await eventually(lambda: closed_in(leader, 2), within_s=5, what="#2 mirrored done")

    assert fetched_issue_numbers(fake, mark) == [1, 2]  # #1 once: its own wake ignored
    listener = election(leader).listener
    assert listener is not None
    assert listener.heard == 1


async def test_a_broken_listener_is_listened_again_and_the_sync_goes_on(
    hooked_pair: tuple[GitHubEndpoint, GitHubEndpoint], fake: FakeGitHub, postgres_database: str
) -> None:
    leader, follower = hooked_pair
    listener = election(leader).listener
    assert listener is not None
    pid = listener.server_pid()
    assert pid is not None
    admin = await asyncpg.connect(_asyncpg_dsn(postgres_database))
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await eventually(lambda: not listener.listening, within_s=5, what="the listener broke")

    await listener.ensure()  # what the leader's next lease turn does

    assert listener.listening
    assert listener.server_pid() != pid
    assert election(leader).role == "leader"
    assert (await deliver_closed(follower, fake, 2)).status_code == 202
    await eventually(lambda: closed_in(leader, 2), within_s=5, what="#2 mirrored done")
    assert listener.heard == 1
