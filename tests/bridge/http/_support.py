"""A real bridge with its HTTP listener, and the parts the HTTP tests need around it.

``open_http_mesh`` runs ``running_bridge`` (the composition root, unchanged) on its
embedded broker or on a separate one, and hands back an ``httpx.AsyncClient`` on the real
listener plus a NATS connection playing the space (presence cards, wire callers).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import (
    BridgeConfig,
    EndpointConfig,
    HttpConfig,
    HttpLimits,
    HttpToken,
)
from cotal_tasks.bridge.wiring import Endpoint
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge
from cotal_tasks.core import Seat, StaleMarker
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import (
    Committed,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    IdempotencyRecord,
    Page,
    PageQuery,
    RecordPage,
    StoredTask,
    SyncState,
    TaskStore,
    Write,
)
from tests.conftest import seat
from tests.support.bridge import SPACE, broker, client, set_up_space
from tests.support.cotal import Space, TestCaller
from tests.support.tcp_proxy import TcpProxy

ACME = "com.acme.tasks"
OPS = "com.acme.ops"
Json = dict[str, Any]

READER_ENV = "CT_TEST_READER_TOKEN"
SEAT_ENV = "CT_TEST_SEAT_TOKEN"
NO_UID_ENV = "CT_TEST_NO_UID_TOKEN"
SECRETS = {
    READER_ENV: "reader-" + "r" * 40,
    SEAT_ENV: "seat-" + "s" * 40,
    NO_UID_ENV: "nouid-" + "n" * 40,
}
BUILDER = seat("builder", 1)
OPERATOR = seat("operator", 9)
REVIEWER = seat("reviewer", 2)
OTHER = seat("other", 2)
TOKENS = (
    HttpToken(token_env=READER_ENV, principal="local.dash", capabilities=("tasks.read",)),
    HttpToken(
        token_env=SEAT_ENV,
        principal=BUILDER.principal,
        lifecycle_uid=BUILDER.lifecycleUid,
        capabilities=("tasks.self",),
    ),
    HttpToken(
        token_env=NO_UID_ENV, principal="local.ops", capabilities=("tasks.read", "tasks.self")
    ),
)


def bearer(env: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[env]}"}


@dataclass
class HttpMesh:
    bridge: Bridge
    nc: NATS
    space: Space
    http: httpx.AsyncClient
    proxy: TcpProxy | None = None  # between the bridge and its separate broker

    @property
    def url(self) -> str:
        assert self.bridge.http_url is not None
        return self.bridge.http_url

    def caller(self, who: Seat, endpoint: str = ACME) -> TestCaller:
        return TestCaller(self.nc, SPACE, endpoint, who)

    def endpoint(self, name: str = ACME) -> Endpoint:
        return next(ep for ep in self.bridge.endpoints if ep.config.name == name)

    async def get(self, path: str, **kw: Any) -> httpx.Response:
        return await self.http.get(path, **kw)

    async def ok(self, path: str, **kw: Any) -> Json:
        response = await self.http.get(path, **kw)
        assert response.status_code == 200, response.text
        data: Json = response.json()
        return data


BeforeStart = Callable[[BridgeConfig], Awaitable[None]]


@asynccontextmanager
async def open_http_mesh(
    tmp_path: Path,
    *,
    names: Sequence[str] = (ACME,),
    tokens: Sequence[HttpToken] = (),
    embedded: bool = True,  # False: a separate broker, reached through a TcpProxy
    headers: dict[str, str] | None = None,
    before_start: BeforeStart | None = None,
    local_reader: bool | None = None,  # None: on when embedded (the ``make run`` shape)
    limits: HttpLimits | None = None,
    **endpoint: Any,
) -> AsyncIterator[HttpMesh]:
    """A bridge serving ``names`` with HTTP on a free loopback port.

    ``embedded``: the bridge starts its own broker (the ``make run`` shape, where the
    local reader applies); otherwise it joins a separate broker, as a deployment does.
    """
    async with AsyncExitStack() as stack:
        nats_url = None
        proxy: TcpProxy | None = None
        if not embedded:
            server = await stack.enter_async_context(broker(tmp_path))
            await set_up_space(server.url)
            proxy = TcpProxy("127.0.0.1", server.port)
            await proxy.mend()
            stack.push_async_callback(proxy.cut)
            nats_url = proxy.url
        config = BridgeConfig(
            space=SPACE,
            data_dir=tmp_path / "bridge",
            nats_url=nats_url,
            http=HttpConfig(
                port=0,
                tokens=tuple(tokens),
                local_reader=embedded if local_reader is None else local_reader,
                limits=limits or HttpLimits(),
            ),
            endpoints=tuple(EndpointConfig(name=name, **endpoint) for name in names),
        )
        if before_start is not None:
            await before_start(config)
        running = await stack.enter_async_context(running_bridge(config))
        nc = await client(running.url)
        stack.push_async_callback(_close_quietly, nc)
        assert running.http_url is not None
        http = await stack.enter_async_context(
            httpx.AsyncClient(base_url=running.http_url, headers=headers, timeout=30)
        )
        yield HttpMesh(running, nc, Space(nc.jetstream(), SPACE), http, proxy)


async def _close_quietly(nc: NATS) -> None:
    with contextlib.suppress(Exception):  # a test may have stopped the broker under it
        await nc.close()


def set_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every token's secret in the environment, for this test."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


async def empty_board(config: BridgeConfig, name: str = ACME) -> str:
    """Create the endpoint's SQLite board (schema only) before the bridge opens it."""
    url = config.endpoint(name).database_url(config.data_dir)
    store = await BoardStore.open(url)
    await store.close()
    return url


class StaleStore:
    """A real store whose reads are labelled stale, as a lagging hosted mirror's are."""

    def __init__(self, inner: TaskStore, marker: StaleMarker) -> None:
        self.inner = inner
        self.marker = marker

    async def freshness(self) -> StaleMarker | None:
        return self.marker

    async def get(self, task_id: str) -> StoredTask:
        return await self.inner.get(task_id)

    async def page(self, query: PageQuery) -> Page:
        return await self.inner.page(query)

    async def page_records(self, query: PageQuery) -> RecordPage:
        return await self.inner.page_records(query)

    async def commit(self, write: Write) -> Committed:
        return await self.inner.commit(write)

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        return await self.inner.recall(key, not_before)

    async def prune(self, before: int, history_before: int | None = None) -> int:
        return await self.inner.prune(before, history_before)

    async def change_seq(self) -> int:
        return await self.inner.change_seq()

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        return await self.inner.history(task_id, limit)

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        return await self.inner.history_page(query)

    async def sync_state(self) -> SyncState | None:
        return await self.inner.sync_state()

    async def close(self) -> None:
        await self.inner.close()


def make_stale(mesh: HttpMesh, name: str, marker: StaleMarker) -> None:
    """Serve ``name`` from its own store, labelled with ``marker`` (wire and HTTP alike)."""
    service = mesh.endpoint(name).service
    service.store = StaleStore(service.store, marker)


async def damage_board(mesh: HttpMesh, name: str = ACME) -> None:
    """Make the endpoint's SQLite file unreadable while the bridge serves it."""
    endpoint = mesh.endpoint(name)
    store = endpoint.store
    assert isinstance(store, BoardStore)
    await store.close()  # drop pooled connections and the read cache
    path = Path(
        endpoint.config.database_url(mesh.bridge.config.data_dir).removeprefix("sqlite:///")
    )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"\x00garbage" * 4096)
