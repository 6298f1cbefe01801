"""Helpers for the GitLab provider tests: a GitLab endpoint opened the way the bridge opens
it (``open_endpoint``) against the fake GitLab on loopback, virtual time for the retry
waits, and readers of the fake's request log.

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
from cotal_tasks.providers.hosted.config import GitLabConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.store import HostedStore
from cotal_tasks.providers.hosted.sync import SyncEngine, SyncReport
from tests.bridge._support import OPERATOR, Client, DictPresence
from tests.conformance.conftest import Mesh
from tests.conftest import seat
from tests.support import bridge as wire
from tests.support.cotal import Space
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, parse_iso

Json = dict[str, Any]

PROJECT = "acme/widgets"
ENCODED = "acme%2Fwidgets"
ISSUES = f"/api/v4/projects/{ENCODED}/issues"
MERGE_REQUESTS = f"/api/v4/projects/{ENCODED}/merge_requests"
ENDPOINT_NAME = "com.acme.gitlab"
SPACE = "demo"
TOKEN_ENV = "COTAL_TASKS_TEST_GITLAB_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_GITLAB_WEBHOOK_TOKEN"
WEBHOOK_SECRET = "a gitlab webhook token nobody else knows"

# The seat directory: two GitLab accounts are seats; every other account is a human.
SEAT_USER = "builder-bot"
BUILDER = seat("builder", 1)  # local.builder, the seat builder-bot is
REVIEWER_USER = "reviewer-bot"
REVIEWER = seat("reviewer", 2)  # local.reviewer, the seat reviewer-bot is
HUMAN = "alice"
SEATS = {SEAT_USER: BUILDER.principal, REVIEWER_USER: REVIEWER.principal}

CLAIMED = "workflow::in progress"
BLOCKED = "workflow::blocked"
WONT_DO = "workflow::won't do"


def gitlab_config(api_url: str, **overrides: Any) -> GitLabConfig:
    """The endpoint's GitLab section: writes unspaced, a long poll interval (the tests poll
    by hand or wake the loop), the token read from ``TOKEN_ENV``."""
    settings: Json = {
        "project": PROJECT,
        "api_url": api_url,
        "token_env": TOKEN_ENV,
        "mutation_spacing_s": 0.0,
        "poll_interval_s": 60.0,
        "seats": SEATS,
    }
    return GitLabConfig.model_validate({**settings, **overrides})


def endpoint_config(
    api_url: str, *, database: str | None = None, page_ceiling: int = 100, **overrides: Any
) -> EndpointConfig:
    return EndpointConfig(
        name=ENDPOINT_NAME,
        provider="gitlab",
        database=database,
        page_ceiling=page_ceiling,
        gitlab=gitlab_config(api_url, **overrides),
    )


def bridge_config(data_dir: Path, endpoint: EndpointConfig) -> BridgeConfig:
    return BridgeConfig(
        space=SPACE, data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )


def task_id(iid: int) -> str:
    return f"{PROJECT}#{iid}"


class VirtualTime:
    """Stands in for the wall clock and ``asyncio.sleep`` of a ``TrackerHttp``: a wait is
    recorded and moves the fake GitLab's clock (so its throttle window really resets)
    instead of sleeping."""

    def __init__(self, fake: FakeGitLab) -> None:
        self.fake = fake
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.fake.advance(math.ceil(seconds))

    def install(self, http: TrackerHttp) -> None:
        http.sleep = self.sleep
        http.clock_s = self.fake.clock.time


@dataclass
class GitLabEndpoint:
    """An opened GitLab endpoint: the service, the mirror-backed store, the sync engine,
    the fake behind it and the presence port the service and the sync read."""

    fake: FakeGitLab
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

    async def get(self, iid: int) -> Json:
        return await self.client.get(task_id(iid))

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

    async def all_tasks(self) -> list[Json]:
        pages = await self.client.page_all("list-tasks", OPERATOR, {"limit": 100})
        return [task for page in pages for task in page["tasks"]]

    async def cursor(self) -> str | None:
        saved = await self.sync.checkpoint()
        cursor = saved.get("cursor")
        assert cursor is None or isinstance(cursor, str)
        return cursor

    def virtual_time(self) -> VirtualTime:
        clock = VirtualTime(self.fake)
        clock.install(self.hosted.http)
        return clock


@asynccontextmanager
async def open_gitlab(
    fake: FakeGitLab,
    api_url: str,
    data_dir: Path,
    *,
    presence: DictPresence | None = None,
    database: str | None = None,
    **overrides: Any,
) -> AsyncIterator[GitLabEndpoint]:
    """``open_endpoint`` on a GitLab endpoint against ``api_url`` (the fake on loopback)."""
    endpoint = endpoint_config(api_url, database=database, **overrides)
    config = bridge_config(data_dir, endpoint)
    cards = presence if presence is not None else DictPresence()
    async with open_endpoint(config, endpoint, cards, serve=True) as opened:
        yield GitLabEndpoint(fake, opened, cards)


# -- the request log --------------------------------------------------------------------


def issue_pages(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """``GET /projects/:id/issues`` (the issue listing) from position ``since`` of the log."""
    return [r for r in fake.requests[since:] if r.matches("GET", ISSUES)]


def merge_request_pages(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """``GET /projects/:id/merge_requests`` (the merge-request sweep)."""
    return [r for r in fake.requests[since:] if r.matches("GET", MERGE_REQUESTS)]


def evidence_requests(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """Every read that is not a listing: single issues, their links, merge requests."""
    return [
        r
        for r in fake.requests[since:]
        if r.method == "GET"
        and not r.matches("GET", ISSUES)
        and not r.matches("GET", MERGE_REQUESTS)
    ]


def fetched_iids(fake: FakeGitLab, since: int = 0) -> list[int]:
    """The issues read one by one (``GET /issues/:iid``), in order."""
    return [
        int(r.path.rsplit("/", 1)[1])
        for r in fake.requests[since:]
        if r.matches("GET", f"{ISSUES}/*") and r.path.rsplit("/", 1)[1].isdigit()
    ]


def writes_to(fake: FakeGitLab, iid: int, since: int = 0) -> list[RecordedRequest]:
    """The writes to one issue (its PUTs and notes) from position ``since``."""
    return [
        r
        for r in fake.requests[since:]
        if r.is_write and (r.path == f"{ISSUES}/{iid}" or r.path.startswith(f"{ISSUES}/{iid}/"))
    ]


def labels_of(fake: FakeGitLab, iid: int) -> list[str]:
    return list(fake.issue(PROJECT, iid).labels)


def newest_updated_at(fake: FakeGitLab) -> int:
    """The highest ``updated_at`` (epoch ms) of the project's issues."""
    return max(issue.updated_ms for issue in fake.project(PROJECT).issues.values())


def ms(stamp: str) -> int:
    return parse_iso(stamp)


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


# -- over the wire ------------------------------------------------------------------------


@dataclass
class GitLabMesh(Mesh):
    """A broker, a bridge serving a GitLab endpoint (``tests.support.bridge.ENDPOINT``)
    against the fake, and a client connection."""

    fake: FakeGitLab

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
async def gitlab_mesh(
    tmp_path: Path,
    fake: FakeGitLab,
    api_url: str,
    *,
    page_ceiling: int = 100,
    wait_for_sync: bool = True,
    **overrides: Any,
) -> AsyncIterator[GitLabMesh]:
    async with wire.broker(tmp_path) as server:
        await wire.set_up_space(server.url)
        config = wire.bridge_config(
            server.url,
            tmp_path / "bridge",
            None,
            provider="gitlab",
            page_ceiling=page_ceiling,
            gitlab=gitlab_config(api_url, **overrides),
        )
        async with wire.bridge_on(config) as running:
            if wait_for_sync:
                await first_sync(running)
            nc = await wire.client(server.url)
            try:
                yield GitLabMesh(server.url, running, nc, Space(nc.jetstream(), wire.SPACE), fake)
            finally:
                await nc.close()
