"""The composition root: the one place that names concrete providers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.service import CommandService, NoPresence, PresenceSource, ServiceSettings
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import TaskStore


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Endpoint:
    config: EndpointConfig
    store: TaskStore
    service: CommandService
    location: str


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
) -> AsyncIterator[Endpoint]:
    """Open the endpoint's store and its command service; close the store on exit.

    ``serve`` is for the process that serves the endpoint (see ``BoardStore.open``).
    """
    store = await open_store(config, endpoint, serve=serve)
    settings = ServiceSettings(
        space=config.space,
        page_ceiling=endpoint.page_ceiling,
        retention_ms=int(endpoint.idempotency_retention_hours * 3_600_000),
        require_presence=endpoint.require_presence,
    )
    try:
        service = CommandService(store, settings, wall_clock_ms, presence or NoPresence())
        yield Endpoint(endpoint, store, service, store.label)
    finally:
        await store.close()
