"""What the GitHub and GitLab provider test helpers share: numbered issues made on a fake,
virtual time for the retry waits, an opened hosted endpoint (service, mirror, sync engine,
the fake behind it), a wire mesh whose bridge serves a hosted endpoint, and waiting for a
first sync. ``REFUSED_WRITES`` runs a write-back test once per refusal.

Each tracker's ``_support`` module binds these to its fake and its config section.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx
import pytest
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge
from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.hosted.assemble import Hosted
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError
from cotal_tasks.providers.hosted.store import HostedStore
from cotal_tasks.providers.hosted.sync import SyncEngine, SyncReport
from cotal_tasks.providers.hosted.tracker import Tracker
from tests.bridge._support import OPERATOR, Client, DictPresence
from tests.conformance.conftest import Mesh
from tests.support import bridge as wire
from tests.support.cotal import Space
from tests.support.polling import eventually

Json = dict[str, Any]
SPACE = "demo"

# A write the tracker refuses (``status``), and the contract ``code`` it surfaces as.
REFUSED_WRITES = pytest.mark.parametrize(
    ("status", "code"),
    [(403, ErrorCode.PERMISSION_DENIED), (422, ErrorCode.FAILED_PRECONDITION)],
)


class TrackerClock(Protocol):
    def time(self) -> float: ...


class TrackerFake(Protocol):
    """What the shared helpers need of a fake tracker: its clock, moved by hand."""

    @property
    def clock(self) -> TrackerClock: ...

    def advance(self, seconds: int = 1) -> int: ...


class IssueMaker(TrackerFake, Protocol):
    """A fake that makes an issue in a repository or project from its title."""

    def add_issue(self, where: str, title: str, /) -> Any: ...


F = TypeVar("F", bound=TrackerFake)


def add_issues(fake: IssueMaker, where: str, count: int, *, spacing_s: int = 0) -> None:
    """Issues "Issue 1" to "Issue ``count``" in ``where``, the fake's clock moved
    ``spacing_s`` seconds after each (not at all for 0)."""
    for k in range(1, count + 1):
        fake.add_issue(where, f"Issue {k}")
        if spacing_s:
            fake.advance(spacing_s)


def bridge_config(data_dir: Path, endpoint: EndpointConfig) -> BridgeConfig:
    return BridgeConfig(
        space=SPACE, data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )


class VirtualTime(Generic[F]):
    """Stands in for the wall clock and ``asyncio.sleep`` of a ``TrackerHttp``: a wait is
    recorded and moves the fake tracker's clock (so its rate-limit or throttle window
    really resets) instead of sleeping."""

    def __init__(self, fake: F) -> None:
        self.fake = fake
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.fake.advance(math.ceil(seconds))

    def install(self, http: TrackerHttp) -> None:
        http.sleep = self.sleep
        http.clock_s = self.fake.clock.time


def hosted_parts(endpoint: Endpoint) -> Hosted:
    """A hosted endpoint's own parts (the store, the sync loop, the tracker, ...)."""
    parts = endpoint.parts
    assert isinstance(parts, Hosted), "not a hosted endpoint"
    return parts


@dataclass
class HostedEndpoint(Generic[F]):
    """An opened hosted endpoint: the service, the mirror-backed store, the sync engine,
    the fake behind it and the presence port the service and the sync read."""

    fake: F
    endpoint: Endpoint
    presence: DictPresence
    client: Client = field(init=False)
    prefix: ClassVar[str] = ""  # the repository or project path task ids start with

    def __post_init__(self) -> None:
        self.client = Client(self.endpoint.service, self.endpoint.store)

    @property
    def hosted(self) -> Hosted:
        return hosted_parts(self.endpoint)

    @property
    def sync(self) -> SyncEngine:
        return self.hosted.sync

    @property
    def tracker(self) -> Tracker:
        return self.hosted.tracker

    @property
    def store(self) -> HostedStore:
        return self.hosted.store

    async def poll(self) -> SyncReport:
        """One poll of every source; the first source's report (an endpoint over one
        source: its only one)."""
        return await poll_every_source(self.hosted)

    async def get(self, number: int) -> Json:
        """The task of issue ``number``."""
        return await self.client.get(f"{self.prefix}#{number}")

    async def all_tasks(self) -> list[Json]:
        pages = await self.client.page_all("list-tasks", OPERATOR, {"limit": 100})
        return [task for page in pages for task in page["tasks"]]

    async def seq(self) -> int:
        return await self.store.change_seq()

    def virtual_time(self) -> VirtualTime[F]:
        clock = VirtualTime(self.fake)
        clock.install(self.hosted.http)
        return clock

    def sync_on_tracker_time(self) -> None:
        """The sync's clock (its reconcile cadence) and the tracker client's (the
        cadences of the listings read beside the issues, ``hosted.cadence``) follow the
        fake tracker's clock, so a test moves them all by hand."""
        clock = self.fake.clock
        self.sync.clock = lambda: int(clock.time() * 1000)
        self.hosted.http.clock_s = clock.time


@asynccontextmanager
async def open_hosted(
    endpoint: EndpointConfig, data_dir: Path, presence: DictPresence | None
) -> AsyncIterator[tuple[Endpoint, DictPresence]]:
    """``open_endpoint`` on a hosted endpoint, as the bridge opens it."""
    config = bridge_config(data_dir, endpoint)
    cards = presence if presence is not None else DictPresence()
    async with open_endpoint(config, endpoint, cards, serve=True) as opened:
        yield opened, cards


E = TypeVar("E", bound=HostedEndpoint[Any])
M = TypeVar("M", bound="HostedMesh[Any]")
EndpointOf = Callable[..., EndpointConfig]  # (api url, database=, page_ceiling=, **section)


def tracker_section(model: Any, api_url: str, settings: Json, overrides: Mapping[str, Any]) -> Any:
    """A tracker's config section (``model``) as the provider tests default it: writes
    unspaced and a long poll interval (the tests poll by hand or wake the loop), then
    ``settings`` (where, the token's variable, the seats), then ``overrides``."""
    defaults: Json = {"api_url": api_url, "mutation_spacing_s": 0.0, "poll_interval_s": 60.0}
    return model.model_validate({**defaults, **settings, **overrides})


def endpoint_maker(name: str, section_of: Callable[..., Any]) -> EndpointOf:
    """``endpoint_config(api_url, *, database=None, page_ceiling=100, **overrides)``: the
    tracker's endpoint named ``name``, its section ``section_of(api_url, **overrides)``."""

    def endpoint_config(
        api_url: str, *, database: str | None = None, page_ceiling: int = 100, **overrides: Any
    ) -> EndpointConfig:
        return EndpointConfig(
            name=name,
            database=database,
            page_ceiling=page_ceiling,
            settings=section_of(api_url, **overrides),
        )

    return endpoint_config


def endpoint_opener(
    kind: type[E], endpoint_of: EndpointOf
) -> Callable[..., AbstractAsyncContextManager[E]]:
    """``open(fake, api_url, data_dir, *, presence=None, database=None, **overrides)``:
    ``open_endpoint`` on the tracker's endpoint against ``api_url`` (the fake on
    loopback), as ``kind``."""

    @asynccontextmanager
    async def open_tracker(
        fake: Any,
        api_url: str,
        data_dir: Path,
        *,
        presence: DictPresence | None = None,
        database: str | None = None,
        **overrides: Any,
    ) -> AsyncIterator[E]:
        endpoint = endpoint_of(api_url, database=database, **overrides)
        async with open_hosted(endpoint, data_dir, presence) as (opened, cards):
            yield kind(fake, opened, cards)

    return open_tracker


def mesh_opener(
    kind: type[M], section_of: Callable[..., Any]
) -> Callable[..., AbstractAsyncContextManager[M]]:
    """``open(tmp_path, fake, api_url, *, page_ceiling=100, wait_for_sync=True,
    **overrides)``: a wire mesh whose bridge serves the tracker's endpoint."""

    @asynccontextmanager
    async def open_mesh(
        tmp_path: Path,
        fake: Any,
        api_url: str,
        *,
        page_ceiling: int = 100,
        wait_for_sync: bool = True,
        **overrides: Any,
    ) -> AsyncIterator[M]:
        async with hosted_wire(
            tmp_path,
            wait_for_sync=wait_for_sync,
            page_ceiling=page_ceiling,
            settings=section_of(api_url, **overrides),
        ) as (url, running, nc, space):
            yield kind(url, running, nc, space, fake)

    return open_mesh


# -- over the wire ------------------------------------------------------------------------


@dataclass
class HostedMesh(Mesh, Generic[F]):
    """A broker, a bridge serving a hosted endpoint (``tests.support.bridge.ENDPOINT``)
    against a fake tracker, and a client connection."""

    fake: F

    @property
    def endpoint(self) -> Endpoint:
        return self.bridge.endpoints[0]

    @property
    def hosted(self) -> Hosted:
        return hosted_parts(self.endpoint)

    async def poll(self) -> SyncReport:
        """One poll now (the bridge's own loop waits out its long interval meanwhile), of
        every source; the first source's report."""
        return await poll_every_source(self.hosted)


async def poll_every_source(hosted: Hosted) -> SyncReport:
    """A poll of each source of ``hosted`` in turn; the first one's report."""
    report = await hosted.sync.poll_once()
    for source in hosted.sources[1:]:
        await source.sync.poll_once()
    return report


@asynccontextmanager
async def hooked_bridge(
    endpoint: EndpointConfig, data_dir: Path
) -> AsyncIterator[tuple[Bridge, httpx.AsyncClient]]:
    """A bridge serving ``endpoint`` with its HTTP listener (the webhook routes) on a free
    port, after its first sync, and a client of that listener."""
    config = BridgeConfig(
        space=SPACE, data_dir=data_dir, http=HttpConfig(port=0), endpoints=(endpoint,)
    )
    async with running_bridge(config) as bridge:
        assert bridge.http_url is not None
        await first_sync(bridge)
        async with httpx.AsyncClient(base_url=bridge.http_url) as http:
            yield bridge, http


async def first_sync(bridge: Bridge) -> None:
    """Wait until every hosted endpoint of ``bridge`` finished its first sync."""

    async def synced() -> bool:
        parts = [Hosted.of(ep.parts) for ep in bridge.endpoints]
        return all(p is None or p.store.health.last_success_ms is not None for p in parts)

    await eventually(synced, within_s=10)


@asynccontextmanager
async def hosted_wire(
    tmp_path: Path, *, wait_for_sync: bool = True, **endpoint: Any
) -> AsyncIterator[tuple[str, Bridge, NATS, Space]]:
    """Broker, space, a bridge whose endpoint is ``endpoint`` (EndpointConfig fields),
    optionally past its first sync, and a client: (broker url, bridge, client, space)."""
    async with wire.broker(tmp_path) as server:
        await wire.set_up_space(server.url)
        config = wire.bridge_config(server.url, tmp_path / "bridge", None, **endpoint)
        async with wire.bridge_on(config) as running:
            if wait_for_sync:
                await first_sync(running)
            nc = await wire.client(server.url)
            try:
                yield server.url, running, nc, Space(nc.jetstream(), wire.SPACE)
            finally:
                await nc.close()


async def poll_past_page_cap(
    endpoint: HostedEndpoint[Any], asked: Callable[[], int], cap: int
) -> None:
    """Poll a tracker whose listing never ends, ``max_pages = cap``: the poll fails (not
    hangs) with the key and its remedy, in its error and in the endpoint's health, and
    ``asked()`` (the listing requests the fake took) is the cap: nothing past it was sent."""
    with pytest.raises(TrackerHttpError) as caught:
        async with asyncio.timeout(30):
            await endpoint.poll()
    assert asked() == cap
    assert caught.value.status is None
    assert f"past {cap} pages (max_pages)" in caught.value.message
    assert "raise max_pages" in caught.value.message
    failing = endpoint.store.health.failing
    assert failing is not None
    assert "max_pages" in failing
