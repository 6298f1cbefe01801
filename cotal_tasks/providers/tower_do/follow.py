"""Follow the board file as it grows: a file watcher wakes the refresh at once, and a
poll every ``poll_interval_s`` covers what a watcher can miss (a network filesystem, a
directory created later, a watcher that failed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import watchfiles

from cotal_tasks.core import ContractError
from cotal_tasks.providers.tower_do.store import TowerDoStore

log = logging.getLogger(__name__)


class Follower:
    def __init__(self, store: TowerDoStore, poll_interval_s: float) -> None:
        self.store = store
        self.poll_interval_s = poll_interval_s
        self.wake = asyncio.Event()
        self.watching = False  # a watcher is running (else only the poll)
        self._failing: str | None = None  # the refresh failure last logged

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh on every change the watcher reports, and on every poll, until ``stop``."""
        watcher: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                if watcher is None or watcher.done():
                    watcher = asyncio.create_task(self._watch(self.store.board.path, stop))
                self.wake.clear()
                try:
                    await self.store.refresh()
                except ContractError as exc:
                    if exc.message != self._failing:  # once per failure, not once per poll
                        log.warning("tower-do refresh failed: %s", exc.message)
                    self._failing = exc.message
                except Exception:
                    log.exception("tower-do refresh failed unexpectedly")
                else:
                    if self._failing is not None:
                        log.warning("tower-do board %s read again", self.store.board.path)
                    self._failing = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_either(stop, self.wake), self.poll_interval_s)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def _watch(self, board: Path, stop: asyncio.Event) -> None:
        directory = board.parent
        if not directory.is_dir():
            return  # nothing to watch yet: the poll looks again, and so does the next turn
        try:
            self.watching = True
            async for _ in watchfiles.awatch(
                directory,
                stop_event=stop,
                watch_filter=lambda _change, path: Path(path).name == board.name,
                debounce=50,
                step=25,
                rust_timeout=500,  # how long a stop waits for the watcher thread
                recursive=False,
            ):
                self.wake.set()
        except (OSError, RuntimeError) as exc:
            log.info(
                "no file watcher on %s (%s); polling every %g s",
                directory,
                exc,
                self.poll_interval_s,
            )
        finally:
            self.watching = False


async def _either(a: asyncio.Event, b: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
