"""The bridge process's life: start the bridge the config describes, run it until SIGINT
or SIGTERM, then stop it cleanly. What is started is assembled in ``bridge.wiring``."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge


async def serve_until_signalled(config: BridgeConfig, announce: Callable[[Bridge], None]) -> None:
    """Run the bridge until SIGINT or SIGTERM, then stop it cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with running_bridge(config) as bridge:
            announce(bridge)
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
