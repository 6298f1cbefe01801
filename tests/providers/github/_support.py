"""Helpers for the GitHub provider tests: a GitHub endpoint opened the way the bridge opens
it (``open_endpoint``) against the fake GitHub on loopback, plus virtual time for the
retry waits and a few readers of the fake's request log.

Fixtures built on these live in ``conftest.py``; the conformance module imports the
helpers directly.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotal_tasks.bridge.app import Endpoint, open_endpoint
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.hosted import Hosted
from cotal_tasks.bridge.runtime import Bridge
from cotal_tasks.core import Mode, Seat
from cotal_tasks.providers.hosted.config import GitHubConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.store import HostedStore
from cotal_tasks.providers.hosted.sync import SyncEngine, SyncReport
from tests.bridge._support import Client, DictPresence
from tests.conformance.conftest import Mesh
from tests.conftest import seat
from tests.support import bridge as wire
from tests.support.cotal import Space
from tests.support.fake_github import FakeGitHub, RecordedRequest

Json = dict[str, Any]

REPO = "octo-org/hello-world"
ISSUES = f"/repos/{REPO}/issues"
ENDPOINT_NAME = "com.acme.github"
SPACE = "demo"
TOKEN_ENV = "COTAL_TASKS_TEST_GITHUB_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_GITHUB_WEBHOOK_SECRET"
WEBHOOK_SECRET = "a webhook secret nobody else knows"

# The seat directory: one GitHub account that is a seat, everything else is a human.
SEAT_LOGIN = "octobot"
BUILDER = seat("builder", 1)  # local.builder, the seat octobot is
HUMAN = "octocat"
SEATS = {SEAT_LOGIN: BUILDER.principal}


def github_config(api_url: str, **overrides: Any) -> GitHubConfig:
    """The endpoint's GitHub section: writes unspaced, a long poll interval (the tests
    poll by hand or wake the loop), the token read from ``TOKEN_ENV``."""
    settings: Json = {
        "repository": REPO,
        "api_url": api_url,
        "token_env": TOKEN_ENV,
        "mutation_spacing_s": 0.0,
        "poll_interval_s": 60.0,
        "seats": SEATS,
    }
    return GitHubConfig.model_validate({**settings, **overrides})


def endpoint_config(
    api_url: str, *, database: str | None = None, page_ceiling: int = 100, **overrides: Any
) -> EndpointConfig:
    return EndpointConfig(
        name=ENDPOINT_NAME,
        provider="github",
        database=database,
        page_ceiling=page_ceiling,
        github=github_config(api_url, **overrides),
    )


def bridge_config(data_dir: Path, endpoint: EndpointConfig) -> BridgeConfig:
    return BridgeConfig(
        space=SPACE, data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )


def task_id(number: int) -> str:
    return f"{REPO}#{number}"


class VirtualTime:
    """Stands in for the wall clock and ``asyncio.sleep`` of a ``TrackerHttp``: a wait
    is recorded and moves the fake GitHub's clock (so its rate-limit window really
    resets) instead of sleeping."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.fake.advance(math.ceil(seconds))

    def install(self, http: TrackerHttp) -> None:
        http.sleep = self.sleep
        http.clock_s = self.fake.clock.time


@dataclass
class GitHubEndpoint:
    """An opened GitHub endpoint: the service, the mirror-backed store, the sync engine,
    the fake behind it and the presence port the service and the sync read."""

    fake: FakeGitHub
    endpoint: Endpoint
    presence: DictPresence
    client: Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = Client(self.endpoint.service, self.endpoint.store)

    @property
    def hosted(self) -> Hosted:
        assert self.endpoint.hosted is not None
        return self.endpoint.hosted

    @property
    def sync(self) -> SyncEngine:
        return self.hosted.sync

    @property
    def store(self) -> HostedStore:
        return self.hosted.store

    async def poll(self) -> SyncReport:
        return await self.sync.poll_once()

    async def seq(self) -> int:
        return await self.store.change_seq()

    async def get(self, number: int) -> Json:
        return await self.client.get(task_id(number))

    async def call(
        self,
        command: str,
        caller: Seat,
        args: Mapping[str, Any] | None = None,
        *,
        mode: Mode | None = None,
        target: Seat | None = None,
    ) -> Json:
        return await self.client.call(command, caller, args, mode=mode, target=target)

    async def checkpoint(self) -> Json:
        return await self.sync.checkpoint()

    def virtual_time(self) -> VirtualTime:
        clock = VirtualTime(self.fake)
        clock.install(self.hosted.http)
        return clock


@asynccontextmanager
async def open_github(
    fake: FakeGitHub,
    api_url: str,
    data_dir: Path,
    *,
    presence: DictPresence | None = None,
    database: str | None = None,
    **overrides: Any,
) -> AsyncIterator[GitHubEndpoint]:
    """``open_endpoint`` on a GitHub endpoint against ``api_url`` (the fake on loopback)."""
    endpoint = endpoint_config(api_url, database=database, **overrides)
    config = bridge_config(data_dir, endpoint)
    cards = presence if presence is not None else DictPresence()
    async with open_endpoint(config, endpoint, cards, serve=True) as opened:
        yield GitHubEndpoint(fake, opened, cards)


# -- the request log --------------------------------------------------------------------


def list_requests(fake: FakeGitHub, since: int = 0) -> list[RecordedRequest]:
    """``GET /repos/{o}/{r}/issues`` (the listing) from position ``since`` of the log."""
    return [r for r in fake.requests[since:] if r.matches("GET", ISSUES)]


def evidence_requests(fake: FakeGitHub, since: int = 0) -> list[RecordedRequest]:
    """Every read that is not the listing: single issues, timelines, pull requests."""
    return [r for r in fake.requests[since:] if r.method == "GET" and not r.matches("GET", ISSUES)]


def fetched_issue_numbers(fake: FakeGitHub, since: int = 0) -> list[int]:
    """The issues read one by one (``GET /issues/{n}``), in order."""
    return [
        int(r.path.rsplit("/", 1)[1])
        for r in fake.requests[since:]
        if r.matches("GET", f"{ISSUES}/*") and r.path.rsplit("/", 1)[1].isdigit()
    ]


def label_names(fake: FakeGitHub, number: int) -> list[str]:
    return list(fake.issue(REPO, number).labels)


async def eventually(
    probe: Callable[[], Awaitable[bool]], *, within_s: float = 5.0, every_s: float = 0.02
) -> float:
    """Wait until ``probe()`` is true; return the seconds it took. Fails after ``within_s``."""
    start = time.monotonic()
    while not await probe():
        if time.monotonic() - start > within_s:
            raise AssertionError(f"not true within {within_s} s")
        await asyncio.sleep(every_s)
    return time.monotonic() - start


# -- over the wire -----------------------------------------------------------------------


@dataclass
class GitHubMesh(Mesh):
    """A broker, a bridge serving a GitHub endpoint (``tests.support.bridge.ENDPOINT``)
    against the fake, and a client connection."""

    fake: FakeGitHub

    @property
    def endpoint(self) -> Endpoint:
        return self.bridge.endpoints[0]

    @property
    def hosted(self) -> Hosted:
        assert self.endpoint.hosted is not None
        return self.endpoint.hosted

    async def poll(self) -> SyncReport:
        """One poll now (the bridge's own loop waits out its long interval meanwhile)."""
        return await self.hosted.sync.poll_once()


async def first_sync(bridge: Bridge) -> None:
    """Wait until every hosted endpoint of ``bridge`` finished its first sync."""

    async def synced() -> bool:
        return all(
            ep.hosted is None or ep.hosted.store.health.last_success_ms is not None
            for ep in bridge.endpoints
        )

    await eventually(synced, within_s=10)


@asynccontextmanager
async def github_mesh(
    tmp_path: Path, fake: FakeGitHub, api_url: str, *, page_ceiling: int = 100, **overrides: Any
) -> AsyncIterator[GitHubMesh]:
    async with wire.broker(tmp_path) as server:
        await wire.set_up_space(server.url)
        config = wire.bridge_config(
            server.url,
            tmp_path / "bridge",
            None,
            provider="github",
            page_ceiling=page_ceiling,
            github=github_config(api_url, **overrides),
        )
        async with wire.bridge_on(config) as running:
            await first_sync(running)
            nc = await wire.client(server.url)
            try:
                yield GitHubMesh(server.url, running, nc, Space(nc.jetstream(), wire.SPACE), fake)
            finally:
                await nc.close()
