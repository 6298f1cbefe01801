"""One endpoint opened from its config: its store (a board, or a tracker over a board
mirror) and its command service."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.hosted import Hosted, build_hosted, presence_uids
from cotal_tasks.bridge.service.commands import (
    CommandService,
    NoPresence,
    PresenceSource,
    ServiceSettings,
)
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import TaskStore
from cotal_tasks.providers.tower_do import TowerDo
from cotal_tasks.providers.tower_do import build as build_tower_do


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Endpoint:
    config: EndpointConfig
    store: TaskStore
    service: CommandService
    location: str
    hosted: Hosted | None = None  # a hosted tracker's sync loop, client and webhook secret
    tower_do: TowerDo | None = None  # a tower-do board's store and its follower


async def open_store(
    config: BridgeConfig, endpoint: EndpointConfig, *, serve: bool = False
) -> BoardStore:
    return await BoardStore.open(endpoint.database_url(config.data_dir), serve=serve)


@asynccontextmanager
async def open_endpoint(
    config: BridgeConfig,
    endpoint: EndpointConfig,
    presence: PresenceSource | None = None,
    *,
    serve: bool = False,
    metrics: Metrics | None = None,
) -> AsyncIterator[Endpoint]:
    """Open the endpoint's store and its command service; close them on exit.

    ``serve`` is for the process that serves the endpoint (see ``BoardStore.open``). A
    hosted endpoint's store is its tracker over a local board mirror.
    """
    board = await open_store(config, endpoint, serve=serve)
    hosted: Hosted | None = None
    tower: TowerDo | None = None
    store: TaskStore = board
    if endpoint.tower_do is not None:
        tower = build_tower_do(
            endpoint.tower_do,
            board,
            space=config.space,
            clock=wall_clock_ms,
            seat_uids=presence_uids(presence),
        )
        store = tower.store
        with contextlib.suppress(ContractError):  # unreadable: reads say stale, not empty
            await tower.store.refresh()
    elif endpoint.provider != "board":
        try:
            hosted = build_hosted(
                config, endpoint, board, wall_clock_ms, presence=presence, metrics=metrics
            )
        except BaseException:
            await board.close()
            raise
        store = hosted.store
    settings = ServiceSettings(
        space=config.space,
        page_ceiling=endpoint.page_ceiling,
        retention_ms=int(endpoint.idempotency_retention_hours * 3_600_000),
        require_presence=endpoint.require_presence,
    )
    try:
        service = CommandService(store, settings, wall_clock_ms, presence or NoPresence())
        if hosted is not None:
            hosted.store.on_change(service.announce)
        if tower is not None:
            tower.store.on_change(service.announce)
        yield Endpoint(endpoint, store, service, board.label, hosted, tower)
    finally:
        if hosted is not None:
            await hosted.close()
        await store.close()
