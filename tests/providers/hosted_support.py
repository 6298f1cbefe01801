"""What the GitHub and GitLab provider test helpers share: virtual time for the retry
waits, an opened hosted endpoint (service, mirror, sync engine, the fake behind it), a
wire mesh whose bridge serves a hosted endpoint, and waiting for a first sync.

Each tracker's ``_support`` module binds these to its fake and its config section.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.hosted import Hosted
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.bridge.wiring.process import Bridge
from cotal_tasks.core import Mode, Seat
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.store import HostedStore
from cotal_tasks.providers.hosted.sync import SyncEngine, SyncReport
from tests.bridge._support import Client, DictPresence
from tests.conformance.conftest import Mesh
from tests.support import bridge as wire
from tests.support.cotal import Space

Json = dict[str, Any]
SPACE = "demo"


class TrackerClock(Protocol):
    def time(self) -> float: ...


class TrackerFake(Protocol):
    """What the shared helpers need of a fake tracker: its clock, moved by hand."""

    @property
    def clock(self) -> TrackerClock: ...

    def advance(self, seconds: int = 1) -> int: ...


F = TypeVar("F", bound=TrackerFake)


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


@dataclass
class HostedEndpoint(Generic[F]):
    """An opened hosted endpoint: the service, the mirror-backed store, the sync engine,
    the fake behind it and the presence port the service and the sync read."""

    fake: F
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

    def virtual_time(self) -> VirtualTime[F]:
        clock = VirtualTime(self.fake)
        clock.install(self.hosted.http)
        return clock

    def sync_on_tracker_time(self) -> None:
        """The sync's clock (its reconcile cadence) follows the fake tracker's clock, so a
        test moves both by hand."""
        clock = self.fake.clock
        self.sync.clock = lambda: int(clock.time() * 1000)


@asynccontextmanager
async def open_hosted(
    endpoint: EndpointConfig, data_dir: Path, presence: DictPresence | None
) -> AsyncIterator[tuple[Endpoint, DictPresence]]:
    """``open_endpoint`` on a hosted endpoint, as the bridge opens it."""
    config = bridge_config(data_dir, endpoint)
    cards = presence if presence is not None else DictPresence()
    async with open_endpoint(config, endpoint, cards, serve=True) as opened:
        yield opened, cards


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
class HostedMesh(Mesh, Generic[F]):
    """A broker, a bridge serving a hosted endpoint (``tests.support.bridge.ENDPOINT``)
    against a fake tracker, and a client connection."""

    fake: F

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
