"""A real broker, a real bridge on it (SQLite board), and callers speaking the wire."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.wiring.process import Bridge
from tests.conftest import seat
from tests.support.bridge import (
    ENDPOINT,
    SPACE,
    bridge_config,
    bridge_on,
    broker,
    client,
    set_up_space,
)
from tests.support.cotal import Space, TestCaller

# The page ceiling of the `small_mesh` bridge: small enough to overflow with a few tasks.
SMALL_PAGE_CEILING = 5


@dataclass
class Mesh:
    url: str
    bridge: Bridge
    nc: NATS
    space: Space

    def caller(self, actor: str, n: int = 1, owner: str = "local") -> TestCaller:
        return TestCaller(self.nc, SPACE, ENDPOINT, seat(actor, n, owner))


@asynccontextmanager
async def open_mesh(tmp_path: Path, **endpoint: object) -> AsyncIterator[Mesh]:
    """Broker, space, bridge (``endpoint`` overrides its EndpointConfig) and a client."""
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = bridge_config(server.url, tmp_path / "bridge", None, **endpoint)
        async with bridge_on(config) as running:
            nc = await client(server.url)
            try:
                yield Mesh(server.url, running, nc, Space(nc.jetstream(), SPACE))
            finally:
                await nc.close()


MeshOpener = Callable[..., AbstractAsyncContextManager[Mesh]]


def mesh_fixtures(opener: MeshOpener) -> tuple[Any, Any]:
    """The ``mesh`` and ``small_mesh`` fixtures of a suite whose meshes ``opener`` opens
    (``opener(tmp_path, **endpoint)``, as ``open_mesh``); bind them to those names."""

    @pytest.fixture
    async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
        async with opener(tmp_path) as running:
            yield running

    @pytest.fixture
    async def small_mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
        """A mesh whose endpoint pages at most ``SMALL_PAGE_CEILING`` tasks."""
        async with opener(tmp_path, page_ceiling=SMALL_PAGE_CEILING) as running:
            yield running

    return mesh, small_mesh


mesh, small_mesh = mesh_fixtures(open_mesh)
