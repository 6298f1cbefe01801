"""A hosted endpoint opened as the bridge opens it, for the tracker benches: its sync."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.providers.hosted.assemble import Hosted
from cotal_tasks.providers.hosted.sync import SyncEngine
from tests.bridge._support import DictPresence


@asynccontextmanager
async def hosted_sync(endpoint: EndpointConfig, data_dir: Path) -> AsyncIterator[SyncEngine]:
    """The sync of ``endpoint`` on a fresh mirror under ``data_dir`` (no HTTP listener)."""
    config = BridgeConfig(data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(endpoint,))
    async with open_endpoint(config, endpoint, DictPresence(), serve=True) as opened:
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        yield hosted.sync
