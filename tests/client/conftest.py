"""A real broker and a real bridge (SQLite board) for the client's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.client import Seat, TasksClient
from tests.conformance.conftest import open_mesh
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE

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
    async with open_mesh(tmp_path, page_ceiling=PAGE_CEILING) as mesh:
        yield Board(mesh.url, mesh.nc, mesh.bridge.config)
