"""A real broker and a real bridge (SQLite board) for the client's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.client import Seat, TasksClient
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

PAGE_CEILING = 5


@dataclass
class Board:
    url: str
    nc: NATS
    config: BridgeConfig

    def client(self, actor: str, n: int = 1, **options: object) -> TasksClient:
        return TasksClient(self.nc, SPACE, ENDPOINT, seat(actor, n), **options)  # type: ignore[arg-type]

    def seat(self, actor: str, n: int = 1) -> Seat:
        return seat(actor, n)


@pytest.fixture
async def board(tmp_path: Path) -> AsyncIterator[Board]:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = bridge_config(server.url, tmp_path / "bridge", None, page_ceiling=PAGE_CEILING)
        async with bridge_on(config):
            nc = await client(server.url)
            try:
                yield Board(server.url, nc, config)
            finally:
                await nc.close()
