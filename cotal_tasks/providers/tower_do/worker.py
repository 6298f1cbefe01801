"""The board's file work, off the event loop, in a thread a stop never waits for.

Reads and appends are non-blocking and bounded (``folder``), but a filesystem can still
hang a call (a network mount gone away). ``asyncio.to_thread`` would leave such a call in
the loop's default executor, which ``asyncio.run`` and the interpreter's exit both wait
for: the process would outlive its bounded stop. Here each call runs in a daemon thread;
the caller awaits its result and may be cancelled (a stop) without waiting for it. While
an abandoned call is still running, the next one is refused rather than run beside it on
the same board state.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
V = TypeVar("V")


class StillBusy(Exception):
    """The previous file call has not returned (it was abandoned while it hung)."""


class FileWorker:
    def __init__(self, name: str) -> None:
        self.name = name
        self._idle = threading.Event()  # no call is running
        self._idle.set()

    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` in a daemon thread; its result, or its exception."""
        if not self._idle.is_set():
            raise StillBusy(f"a previous call on {self.name} has not returned")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()  # the caller's log context, as to_thread keeps

        def body() -> None:
            try:
                result = context.run(work)
            except BaseException as exc:  # handed to the awaiting caller
                self._idle.set()
                _hand_over(loop, future, future.set_exception, exc)
            else:
                self._idle.set()
                _hand_over(loop, future, future.set_result, result)

        self._idle.clear()
        threading.Thread(target=body, name=f"file {self.name}", daemon=True).start()
        return await future


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[T],
    setter: Callable[[V], object],
    value: V,
) -> None:
    """Settle ``future`` on its loop, unless its caller left (cancelled) or the loop closed."""

    def settle() -> None:
        if not future.done():
            setter(value)

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
        loop.call_soon_threadsafe(settle)
