"""The bridge process's life: start the bridge the config describes, run it until SIGINT
or SIGTERM, then stop it cleanly. What is started is assembled in ``bridge.wiring``.

The start first raises the soft open-file limit to the hard one (``process.openfiles``),
then reaches every tracker (``trackers``: a tracker that does not answer within
``tracker_connect_timeout_s`` stops it). A signal is honoured in every phase. During
start-up it abandons the start at once (what was started is stopped, in reverse order).
While serving it begins a clean stop: the background loops get ``STOP_GRACE_S`` to finish
their work in flight before they are cancelled, and the whole stop gets
``STOP_DEADLINE_S``; a second signal cancels at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.process.openfiles import raise_open_files
from cotal_tasks.bridge.process.trackers import reach_trackers
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge

log = logging.getLogger(__name__)

STOP_DEADLINE_S = 15.0  # a clean stop, all of it; the loops' own grace is STOP_GRACE_S
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve_until_signalled(
    config: BridgeConfig, announce: Callable[[Bridge], Awaitable[None]]
) -> str | None:
    """Run the bridge until SIGINT or SIGTERM, then stop it cleanly. ``None`` after a stop
    while serving; the signal's name when it came during start-up."""
    raise_open_files()
    stop = asyncio.Event()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def body() -> None:
        await reach_trackers(config)
        async with running_bridge(config) as bridge:
            started.set()
            await announce(bridge)
            await stop.wait()

    task = asyncio.create_task(body())
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()
        if not started.is_set() or len(received) > 1:
            task.cancel()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        try:
            await _stopping(task, stop)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # this coroutine itself was cancelled, not the bridge by a signal
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
    if received and not started.is_set():
        return received[0]
    return None


async def _stopping(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """Wait for ``task``; once ``stop`` is set, give it ``STOP_DEADLINE_S`` to finish."""
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        done, _ = await asyncio.wait({task}, timeout=STOP_DEADLINE_S)
        if not done:
            log.warning("the bridge did not stop within %g s; cancelling", STOP_DEADLINE_S)
            task.cancel()
    await task
