"""The one polling helper: wait until a condition holds, or fail naming what did not."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    within_s: float = 5.0,
    *,
    what: str = "the condition",
    every: float = 0.02,
) -> float:
    """Wait until ``condition()`` (a bool, or an awaitable one) is true; return the seconds
    it took. Fails with ``<what>: not true within <within_s> s`` after ``within_s``.

    For what must happen. What must not happen is not waited for: force the step that
    would do it (a poll, a refresh, a round trip behind it), then assert."""
    start = time.monotonic()
    while True:
        answer = condition()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return time.monotonic() - start
        if time.monotonic() - start > within_s:
            raise AssertionError(f"{what}: not true within {within_s} s")
        await asyncio.sleep(every)
