"""The tower-do parts of an opened endpoint (its store and follower), and a board file
served as an endpoint that the tests write to as tower-do's agents do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.core import ContractError
from cotal_tasks.providers.tower_do import TowerDo, TowerDoConfig
from tests.bridge._support import Client, DictPresence
from tests.conftest import seat

Json = dict[str, Any]
WORKER = seat("worker", 1)
OTHER = seat("other", 2)
READER = seat("reader", 3)
SEATS = {"coder-1": "local.worker"}


def tower_of(endpoint: Endpoint) -> TowerDo:
    assert isinstance(endpoint.parts, TowerDo), "not a tower-do endpoint"
    return endpoint.parts


def agent_event(key: str, subject: str, status: str, by: str, at: int, **extra: Any) -> str:
    """One line as tower-do's own writer appends it."""
    task = {"key": key, "subject": subject, "status": status, **extra}
    task.setdefault("dependsOn", [])
    task.setdefault("blockedBy", [])
    task["updatedAt"] = at
    event = {"kind": "task", "op": "upsert", "key": key, "task": task, "by": by, "at": at}
    return json.dumps(event) + "\n"


class Board:
    def __init__(self, endpoint: Endpoint, path: Path, presence: DictPresence) -> None:
        self.endpoint = endpoint
        self.path = path
        self.presence = presence
        self.client = Client(endpoint.service, endpoint.store)

    async def call(self, command: str, caller: Any, args: Json | None = None, **kw: Any) -> Json:
        return await self.client.call(command, caller, args, **kw)

    def agent(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)

    async def refresh(self) -> int:
        return await tower_of(self.endpoint).store.refresh()

    def events(self) -> list[Json]:
        return [json.loads(line) for line in self.path.read_text("utf-8").splitlines() if line]


@asynccontextmanager
async def open_board(tmp_path: Path) -> AsyncIterator[Board]:
    """A board file under ``tmp_path`` served as an endpoint (its follower not running:
    a test refreshes, or the endpoint looks itself), with ``WORKER`` present."""
    path = tmp_path / "project" / "board.jsonl"
    path.parent.mkdir()
    endpoint = EndpointConfig(settings=TowerDoConfig(board=path, seats=SEATS))
    config = BridgeConfig(
        data_dir=tmp_path / "data", http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    presence = DictPresence()
    presence.put(WORKER, environment=None)
    async with open_endpoint(config, endpoint, presence, serve=True) as opened:
        yield Board(opened, path, presence)


async def refused(board: Board, command: str, caller: Any, args: Json, **kw: Any) -> ContractError:
    with pytest.raises(ContractError) as caught:
        await board.call(command, caller, args, **kw)
    assert caught.value.outcome == "not-executed"
    return caught.value
