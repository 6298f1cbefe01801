"""Group commit on an event loop (the PostgreSQL board).

Writes that arrive while a transaction is committing wait, and then share the next
transaction. Each ``commit_many`` call is one item: it commits whole or not at all, and
a refused item (a revision conflict, an idempotency key already taken) is rolled back
alone while its neighbours commit. Should a batch fail before its ``COMMIT`` all the
same (a deadlock with another instance's writer, a serialization failure), each of its
items is retried in its own transaction, so one item's failure is never its neighbours'.
A failure during ``COMMIT`` itself leaves every item's outcome unknown (``unavailable``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from cotal_tasks.providers.board.records import Columns, columns, unavailable
from cotal_tasks.providers.store import Committed, Write

Outcome = list[Committed] | BaseException
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Item:
    """One ``commit_many`` call: its writes, their row values, and who waits for it."""

    writes: Sequence[Write]
    rows: list[Columns]
    future: asyncio.Future[list[Committed]]


class CommitFailed(Exception):
    """``COMMIT`` itself failed: the batch may or may not be durable."""


RunBatch = Callable[[list[Item]], Awaitable[list[Outcome]]]


class GroupCommit:
    def __init__(self, run_batch: RunBatch, errors: tuple[type[BaseException], ...]) -> None:
        self._run = run_batch
        self._errors = errors
        self._pending: list[Item] = []
        self._drainer: asyncio.Task[None] | None = None

    async def commit(self, writes: Sequence[Write]) -> list[Committed]:
        future: asyncio.Future[list[Committed]] = asyncio.get_running_loop().create_future()
        self._pending.append(Item(writes, [columns(w.task) for w in writes], future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        # A caller that gives up does not stop the write: its neighbours share it.
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Let the queued writes finish."""
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            outcomes = await self._outcomes(batch)
            if outcomes is None:  # one item's trouble is not its neighbours': each alone
                outcomes = []
                for item in batch:
                    alone = await self._outcomes([item])
                    assert alone is not None  # a batch of one never falls back
                    outcomes.append(alone[0])
            for item, outcome in zip(batch, outcomes, strict=True):
                if item.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    item.future.set_exception(outcome)
                else:
                    item.future.set_result(outcome)

    async def _outcomes(self, batch: list[Item]) -> list[Outcome] | None:
        """The batch's outcomes; ``None`` when a batch of several failed before COMMIT."""
        try:
            return await self._run(batch)
        except CommitFailed as exc:
            cause = exc.__cause__ or exc
            return [unavailable("committing a write", cause) for _ in batch]
        except Exception as exc:  # the listed errors, and never leave a writer unanswered
            if len(batch) > 1:
                return None
            if not isinstance(exc, self._errors):
                log.error("a board write failed unexpectedly", exc_info=exc)
            return [unavailable("writing a task", exc)]
