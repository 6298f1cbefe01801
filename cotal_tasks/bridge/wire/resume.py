"""Finish in a task a coroutine that was started outside of one.

A read is served inline in the subscription callback (``server.EndpointServer._receive``)
by sending into its coroutine directly; when it has to wait, ``resumed`` wraps the
started coroutine so an ``asyncio`` task can drive it on from that first wait.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any


@types.coroutine
def _steps(coroutine: Coroutine[Any, Any, None], waiting: Any) -> Generator[Any, Any, None]:
    """Go on driving a coroutine that already ran to its first wait on ``waiting``: what
    ``await`` does, from the second step on (each value or exception goes through)."""
    while True:
        try:
            sent = yield waiting
        except BaseException as exc:
            try:
                waiting = coroutine.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting = coroutine.send(sent)
            except StopIteration:
                return


async def resumed(coroutine: Coroutine[Any, Any, None], waiting: Any) -> None:
    await _steps(coroutine, waiting)
