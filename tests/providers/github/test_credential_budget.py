"""One rate-limit budget per token: two GitHub endpoints over different repositories of
the fake, configured with the same token, spend and see one budget. What one endpoint's
answer reports, the other reads; under the reserve the other's sync waits for the reset
while a seat's write still goes; a rate-limit answer to one pauses the other. Time is
the fake's clock, moved by the waits (``VirtualTime``): nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from cotal_tasks.providers.hosted.credentials import PAUSED, SPACING, Credentials
from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttp
from tests.bridge._support import DictPresence
from tests.providers.github._support import REPO, GitHubEndpoint, open_github
from tests.support.fake_github import FakeGitHub

OTHER = "octo-org/gadgets"


@asynccontextmanager
async def two_endpoints(
    fake: FakeGitHub, url: str, tmp_path: Path, **a: object
) -> AsyncIterator[tuple[GitHubEndpoint, GitHubEndpoint]]:
    """Endpoint A over ``REPO`` and B over ``OTHER``, both with the fake's token."""
    fake.add_repo(OTHER)
    fake.add_issue(REPO, "in A")
    fake.add_issue(OTHER, "in B")
    presence = DictPresence()
    async with (
        open_github(fake, url, tmp_path / "a", presence=presence, **a) as first,
        open_github(fake, url, tmp_path / "b", presence=presence, repository=OTHER) as second,
    ):
        yield first, second


async def test_two_endpoints_share_the_budget_and_keep_the_reserve_for_seats(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    async with two_endpoints(fake, github_url, tmp_path) as (a, b):
        a_time, b_time = a.virtual_time(), b.virtual_time()
        fake.set_rate_limit(420, limit=5000, reset_in=600)  # under the 10 % reserve (500)
        await a.poll()
        [budget] = b.hosted.http.rate_budgets.values()  # before: B had seen nothing
        assert (budget.resource, budget.remaining) == ("core", fake.rate_remaining)
        assert fake.rate_remaining < 420

        sent = len(fake.requests)
        await b.client.create("A seat's write goes on under the reserve")
        assert b_time.waits == []
        assert [r.method for r in fake.requests[sent:] if r.is_write] == ["POST"]

        reset = fake.rate_reset
        sent = len(fake.requests)
        await b.poll()  # background work: it waits for the reset, then syncs
        assert len(b_time.waits) == 1
        assert 599 <= b_time.waits[0] <= 600  # until the reset A's answer reported
        assert fake.clock.seconds >= reset
        assert fake.rate_remaining > 4900  # every request went after the refill
        assert len(fake.requests) > sent
        assert a_time.waits == []


async def test_a_wait_past_max_rate_limit_wait_s_is_not_slept_and_sends_nothing(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    async with two_endpoints(fake, github_url, tmp_path) as (a, b):
        a.virtual_time()
        b_time = b.virtual_time()
        fake.set_rate_limit(100, limit=5000, reset_in=3600)
        await a.poll()
        sent = len(fake.requests)
        with pytest.raises(RateLimited) as limited:
            await b.poll()
        assert limited.value.until_s == pytest.approx(fake.rate_reset, abs=1)
        assert len(fake.requests) == sent  # B asked nothing while the budget is A's too
        assert b_time.waits == []


async def test_a_rate_limit_answer_to_one_endpoint_pauses_the_other(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    # A will not sleep 30 s: it fails RateLimited, and the pause it heard stays for B.
    async with two_endpoints(fake, github_url, tmp_path, max_rate_limit_wait_s=5) as (a, b):
        a.virtual_time()
        b_time = b.virtual_time()
        fake.fail_next(status=429, retry_after=30)
        paused_at = fake.clock.seconds
        with pytest.raises(RateLimited):
            await a.poll()
        await b.poll()
        assert b_time.waits
        assert 29 <= b_time.waits[0] <= 30
        assert fake.clock.seconds - paused_at >= 30
        assert (await b.client.get(f"{OTHER}#1"))["title"] == "in B"


def test_different_tokens_never_share_and_the_fingerprint_hides_the_token() -> None:
    credentials = Credentials()
    url = "https://api.github.com"
    token = "ghp_" + "a" * 36
    one = credentials.budget("github", url, token)
    assert credentials.budget("github", url + "/", token) is one
    assert credentials.budget("github", url, "ghp_" + "b" * 36) is not one
    assert credentials.budget("gitlab", url, token) is not one
    assert credentials.budget("github", "https://ghe.example.com/api/v3", token) is not one
    assert len(one.fingerprint) == 12
    assert one.fingerprint not in token
    assert Credentials().fingerprint(token) != one.fingerprint  # keyed: per process


async def test_mutations_keep_their_spacing_across_endpoints() -> None:
    """GitHub asks for mutations a second apart per token: B's write waits for A's."""
    now = [1000.0]
    waits: list[tuple[str, float]] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": {}})

    shared = Credentials().budget("github", "https://api.github.com", "token")
    clients = []
    for _ in range(2):
        http = TrackerHttp(
            httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://x/"),
            lambda response, attempt, now_s: None,
            shared=shared,
            mutation_spacing_s=1.0,
            sleep=sleep,
            clock_s=lambda: now[0],
            on_paced=lambda cause, seconds: waits.append((cause, seconds)),
        )
        clients.append(http)
    a, b = clients
    await a.request("PATCH", "repos/o/r/issues/1", json={"state": "closed"})
    await b.request("POST", "graphql", json={"query": "query { viewer { login } }"})
    await b.request("POST", "repos/o/s/issues/2/comments", json={"body": "hi"})
    await a.request("GET", "repos/o/r/issues/1")
    await a.request("POST", "graphql", json={"query": "mutation { addComment }"})
    assert waits == [(SPACING, 1.0), (SPACING, 1.0)]
    assert PAUSED not in {cause for cause, _ in waits}
    for http in clients:
        await http.client.aclose()


async def test_requests_in_flight_are_bounded_across_every_user_of_the_token() -> None:
    """Before: each source's loop sent its requests on its own, so an endpoint over
    hundreds of repositories had as many in flight at its start (GitHub allows a token
    100). Now at most ``max_in_flight`` of every client sharing the credential are, the
    others waiting their turn in order, and a waiter cancelled gives its turn on."""
    gate = asyncio.Event()
    current = peak = 0

    async def answer(request: httpx.Request) -> httpx.Response:
        nonlocal current, peak
        current += 1
        peak = max(peak, current)
        await gate.wait()
        current -= 1
        return httpx.Response(200, json={})

    shared = Credentials().budget("github", "https://api.github.com", "token")
    clients = [
        TrackerHttp(
            httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://x/"),
            lambda response, attempt, now_s: None,
            shared=shared,
            max_in_flight=3,
        )
        for _ in range(4)
    ]
    asked = [
        asyncio.create_task(clients[k % 4].request("GET", f"repos/o/r{k}/issues"))
        for k in range(12)
    ]
    await asyncio.sleep(0.05)
    assert (peak, shared.in_flight) == (3, 3)
    asked[5].cancel()  # waiting its turn: cancelled, it takes none
    await asyncio.sleep(0.05)
    gate.set()
    done = await asyncio.gather(*asked, return_exceptions=True)
    assert peak == 3
    assert shared.in_flight == 0
    assert sum(isinstance(d, httpx.Response) for d in done) == 11
    assert isinstance(done[5], asyncio.CancelledError)
    for http in clients:
        await http.client.aclose()
