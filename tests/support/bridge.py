"""Fixtures that run real things: a private nats-server and a bridge serving on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.process.broker import EmbeddedNats
from cotal_tasks.bridge.wire.space import ensure_space
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge

SPACE = "conf"
TEST_HTTP = HttpConfig(port=0)  # any free port: never collide with a real listener
ENDPOINT = "com.acme.tasks"


@asynccontextmanager
async def broker(tmp: Path, config_file: Path | None = None) -> AsyncIterator[EmbeddedNats]:
    """A nats-server with JetStream on a free loopback port (never the machine's 4222)."""
    server = EmbeddedNats(tmp / "nats-store", config_file=config_file)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def set_up_space(url: str, space: str = SPACE, **connect: object) -> None:
    """What Cotal's space setup does: the contract store, event stream and KV buckets."""
    nc = await nats.connect(url, **connect)
    try:
        await ensure_space(nc.jetstream(), space)
    finally:
        await nc.close()


def bridge_config(
    url: str, data_dir: Path, database: str | None = None, **endpoint: object
) -> BridgeConfig:
    return BridgeConfig(
        space=SPACE,
        http=TEST_HTTP,
        data_dir=data_dir,
        nats_url=url,
        endpoints=(EndpointConfig(name=ENDPOINT, database=database, **endpoint),),
    )


@asynccontextmanager
async def bridge_on(config: BridgeConfig) -> AsyncIterator[Bridge]:
    async with running_bridge(config) as running:
        yield running


async def client(url: str, **connect: object) -> NATS:
    return await nats.connect(url, **connect)
