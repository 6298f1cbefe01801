"""Group commit over SQLAlchemy (the PostgreSQL board, and SQLite in memory).

Writes that arrive while a transaction is committing wait, and then share the next
transaction. Each ``commit_many`` call is one item in its own savepoint: a refused item
(a revision conflict, an idempotency key already taken) rolls back alone and its
neighbours commit. Items take their row locks in task-id order, so two instances'
batches on one PostgreSQL do not deadlock on each other; should a batch fail before its
``COMMIT`` all the same (a deadlock with another writer, a serialization failure), each
of its items is retried in its own transaction, so one item's failure is never its
neighbours'. A failure during ``COMMIT`` itself leaves every item's outcome unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from cotal_tasks.providers.board import schema
from cotal_tasks.providers.board.records import columns, unavailable
from cotal_tasks.providers.store import Committed, IdempotencyKeyTaken, RevisionConflict, Write

WriteOne = Callable[[AsyncConnection, Write, dict[str, Any]], Awaitable[int]]
Outcome = list[Committed] | BaseException
_Item = tuple[Sequence[Write], list[dict[str, Any]], "asyncio.Future[list[Committed]]"]
_ERRORS = (SQLAlchemyError, OSError, TimeoutError)


class _CommitFailed(Exception):
    """``COMMIT`` itself failed: the batch may or may not be durable."""


class GroupCommit:
    def __init__(self, engine: AsyncEngine, write_one: WriteOne) -> None:
        self._engine = engine
        self._write_one = write_one
        self._pending: list[_Item] = []
        self._drainer: asyncio.Task[None] | None = None

    async def commit(self, writes: Sequence[Write]) -> list[Committed]:
        future: asyncio.Future[list[Committed]] = asyncio.get_running_loop().create_future()
        self._pending.append((writes, [columns(w.task) for w in writes], future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Let the queued writes finish."""
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                outcomes = await self._run(batch)
            except _CommitFailed as exc:
                cause = exc.__cause__ or exc
                outcomes = [unavailable("committing a write", cause) for _ in batch]
            except _ERRORS as exc:
                if len(batch) == 1:
                    outcomes = [unavailable("writing a task", exc)]
                else:  # one item's trouble is not its neighbours': each on its own
                    outcomes = [await self._alone(item) for item in batch]
            for (_writes, _rows, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    async def _alone(self, item: _Item) -> Outcome:
        try:
            return (await self._run([item]))[0]
        except _CommitFailed as exc:
            return unavailable("committing a write", exc.__cause__ or exc)
        except _ERRORS as exc:
            return unavailable("writing a task", exc)

    async def _run(self, batch: list[_Item]) -> list[Outcome]:
        order = sorted(range(len(batch)), key=lambda i: [w.task.taskId for w in batch[i][0]])
        results: dict[int, list[int] | BaseException] = {}
        async with self._engine.connect() as conn:
            transaction = await conn.begin()
            try:
                for index in order:
                    writes, rows, _future = batch[index]
                    try:
                        async with conn.begin_nested():
                            results[index] = [
                                await self._write_one(conn, w, r)
                                for w, r in zip(writes, rows, strict=True)
                            ]
                    except (RevisionConflict, IdempotencyKeyTaken) as refused:
                        results[index] = refused
                written = sum(len(batch[i][0]) for i, r in results.items() if isinstance(r, list))
                if written == 0:
                    await transaction.rollback()
                    return [cast(BaseException, results[i]) for i in range(len(batch))]
                meta = schema.meta
                last = int(
                    (
                        await conn.execute(
                            update(meta)
                            .where(meta.c.key == schema.CHANGE_SEQ)
                            .values(value=meta.c.value + written)
                            .returning(meta.c.value)
                        )
                    ).scalar_one()
                )
            except BaseException:
                with contextlib.suppress(*_ERRORS):
                    await transaction.rollback()
                raise
            try:
                await transaction.commit()
            except _ERRORS as exc:
                raise _CommitFailed() from exc
        seq = last - written
        outcomes: list[Outcome] = []
        for index in range(len(batch)):  # changeSeq in arrival order
            result = results[index]
            if isinstance(result, BaseException):
                outcomes.append(result)
                continue
            committed = []
            for write, revision in zip(batch[index][0], result, strict=True):
                seq += 1
                committed.append(Committed(write.task, revision, seq))
            outcomes.append(committed)
        return outcomes
