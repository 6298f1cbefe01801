"""Point reads that arrive in one turn of the event loop, answered by one query.

On PostgreSQL every read is a round trip, and a write reads before it commits (the
task's current state, and an update's idempotency result). Fifty callers writing at once
are fifty such reads in the same turn of the loop; ``Coalesced`` sends them as one
``= ANY($1)`` query on the next turn and hands each caller its own row. A failure of the
query fails each of them, with an error of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from cotal_tasks.core import ContractError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Fetch = Callable[[Sequence[K]], Awaitable[dict[K, V]]]


class Coalesced(Generic[K, V]):
    """``get(key)``: the value ``fetch`` finds for ``key`` (``None`` when it finds none),
    with every key asked for in one turn fetched together."""

    def __init__(self, fetch: Fetch[K, V]) -> None:
        self._fetch = fetch
        self._waiting: dict[K, list[asyncio.Future[V | None]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def get(self, key: K) -> V | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[V | None] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._flush)
        self._waiting.setdefault(key, []).append(future)
        return await future

    def _flush(self) -> None:
        waiting, self._waiting = self._waiting, {}
        if waiting:
            task = asyncio.create_task(self._answer(waiting))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _answer(self, waiting: dict[K, list[asyncio.Future[V | None]]]) -> None:
        try:
            found = await self._fetch(list(waiting))
        except BaseException as exc:
            for futures in waiting.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(_own(exc))
            if not isinstance(exc, Exception):
                raise
            return
        for key, futures in waiting.items():
            value = found.get(key)
            for future in futures:
                if not future.done():
                    future.set_result(value)


def _own(exc: BaseException) -> BaseException:
    """An error for one waiter: a refusal is copied (each request sets its own outcome)."""
    if isinstance(exc, ContractError):
        own = ContractError(exc.code, exc.message, outcome=exc.outcome, details=exc.details)
        own.__cause__ = exc.__cause__
        return own
    return exc
