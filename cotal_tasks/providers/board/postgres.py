"""A PostgreSQL board's hot path on asyncpg directly: one round trip per read, and
group-committed writes of one round trip each.

SQLAlchemy's async layer costs a transaction and a pool ping per read (several round
trips); here a read is one prepared statement on a pooled connection. A write is one
statement that compare-and-swaps the task and appends its history row; an update that
records its envelope id's result does that in the same statement (``INSERT … ON
CONFLICT DO NOTHING``, the swap only when it was recorded), and a new task's result
goes first, on its own. None raises on a refusal, so a refused write is undone by
deleting its own idempotency row, without a savepoint.
A call of several writes (a mirror's page) runs in a savepoint. Items take their row
locks in task-id order, so two instances' batches do not deadlock on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import asyncpg

from cotal_tasks.providers.board import tables
from cotal_tasks.providers.board.coalesce import Coalesced
from cotal_tasks.providers.board.group import CommitFailed, GroupCommit, Item, Outcome
from cotal_tasks.providers.board.records import Columns, unavailable
from cotal_tasks.providers.store import (
    Committed,
    IdempotencyKey,
    IdempotencyKeyTaken,
    RevisionConflict,
    Write,
)

ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)
_REMEMBER = (
    "INSERT INTO ct_idempotency (key, command, args_digest, result, created_at) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING RETURNING 1"
)
_FORGET_EXPIRED = "DELETE FROM ct_idempotency WHERE key = $1 AND created_at < $2"
_HISTORY = (
    "INSERT INTO ct_history (task_id, at, command, actor, status, note) "
    "SELECT $1, $2, $3, $4, $5, $6 FROM put RETURNING 1"
)
_CREATE = (
    "WITH put AS (INSERT INTO ct_tasks (task_id, revision, created_at, status, bound_owner, "
    "bound_actor, bound_uid, body, summary, updated_at) "
    "VALUES ($7, 1, $8, $9, $10, $11, $12, $13, $14, $15) "
    "ON CONFLICT (task_id) DO NOTHING RETURNING 1) " + _HISTORY
)
_UPDATE = (
    "WITH put AS (UPDATE ct_tasks SET revision = $16, status = $9, bound_owner = $10, "
    "bound_actor = $11, bound_uid = $12, body = $13, summary = $14, updated_at = $15 "
    "WHERE task_id = $7 AND revision = $8 RETURNING 1) " + _HISTORY
)
# The same compare-and-swap with the envelope id's result, in one round trip: the swap and
# its history row run only when the result was recorded (a taken id changes nothing), and
# the answer says which parts ran. A refused swap leaves the result for ``_write`` to undo.
_REMEMBERED_UPDATE = (
    "WITH remember AS (INSERT INTO ct_idempotency (key, command, args_digest, result, "
    "created_at) VALUES ($17, $18, $19, $13, $15) ON CONFLICT (key) DO NOTHING RETURNING 1), "
    "put AS (UPDATE ct_tasks SET revision = $16, status = $9, bound_owner = $10, "
    "bound_actor = $11, bound_uid = $12, body = $13, summary = $14, updated_at = $15 "
    "WHERE task_id = $7 AND revision = $8 AND EXISTS (SELECT 1 FROM remember) RETURNING 1), "
    "history AS (INSERT INTO ct_history (task_id, at, command, actor, status, note) "
    "SELECT $1, $2, $3, $4, $5, $6 FROM put RETURNING 1) "
    "SELECT EXISTS (SELECT 1 FROM remember), EXISTS (SELECT 1 FROM history)"
)


def dollar(sql: str) -> str:
    """A statement written with ``?`` placeholders, numbered the PostgreSQL way."""
    parts = sql.split("?")
    return "".join(f"{part}${n}" for n, part in enumerate(parts[:-1], 1)) + parts[-1]


class Connections:
    """A small pool of asyncpg connections.

    asyncpg's own pool costs about as much again as the query it serves (acquire, reset,
    release bookkeeping); this one is a list of idle connections and a limit. A connection
    that failed is closed and not reused, so a restarted server is reconnected to.
    """

    def __init__(self, dsn: str, connect_timeout_s: float, size: int = 10) -> None:
        self._dsn = dsn
        self._timeout = connect_timeout_s
        self._idle: list[asyncpg.Connection] = []
        self._slots = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            if conn is None or conn.is_closed():
                conn = await asyncpg.connect(self._dsn, timeout=self._timeout)
            try:
                yield conn
            except ERRORS:
                conn.terminate()  # its state is unknown: never hand it out again
                raise
            if not conn.is_closed():
                self._idle.append(conn)

    async def fetch(self, sql: str, *params: Any) -> list[Any]:
        async with self.acquire() as conn:
            return cast(list[Any], await conn.fetch(sql, *params))

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(*ERRORS):
                await conn.close(timeout=self._timeout)


class PostgresBoard:
    def __init__(self, pool: Connections) -> None:
        self._pool = pool
        self._sql: dict[str, str] = {}
        self.group = GroupCommit(self._run, ERRORS)
        # The point reads a write makes before it commits, one query per turn of the loop.
        self.tasks: Coalesced[str, tuple[str, int]] = Coalesced(self._task_rows)
        self.results: Coalesced[str, tuple[str, str, str, int]] = Coalesced(self._results)

    async def _task_rows(self, task_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """The stored body and revision of each of ``task_ids`` there is."""
        rows = await self.rows(
            "reading a task",
            "SELECT task_id, body, revision FROM ct_tasks WHERE task_id = ANY(?)",
            (list(task_ids),),
        )
        return {task_id: (body, revision) for task_id, body, revision in rows}

    async def _results(self, keys: Sequence[str]) -> dict[str, tuple[str, str, str, int]]:
        """The recorded result of each envelope id of ``keys`` there is, with its time."""
        rows = await self.rows(
            "reading an idempotency result",
            "SELECT key, command, args_digest, result, created_at FROM ct_idempotency "
            "WHERE key = ANY(?)",
            (list(keys),),
        )
        return {key: (command, digest, result, at) for key, command, digest, result, at in rows}

    @classmethod
    async def connect(cls, dsn: str, connect_timeout_s: float) -> PostgresBoard:
        pool = Connections(dsn, connect_timeout_s)
        async with pool.acquire():
            pass  # refuse to open a board that cannot be reached
        return cls(pool)

    async def rows(self, where: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        statement = self._sql.get(sql)
        if statement is None:
            statement = self._sql[sql] = dollar(sql)
        try:
            return await self._pool.fetch(statement, *params)
        except ERRORS as exc:
            raise unavailable(where, exc) from exc

    async def close(self) -> None:
        await self.group.close()
        await self._pool.close()

    async def _run(self, batch: list[Item]) -> list[Outcome]:
        order = sorted(range(len(batch)), key=lambda i: [w.task.taskId for w in batch[i].writes])
        results: dict[int, list[int] | BaseException] = {}
        async with self._pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                for index in order:
                    results[index] = await _item(conn, batch[index])
                written = sum(len(batch[i].writes) for i, r in results.items() if type(r) is list)
                if written == 0:
                    await transaction.rollback()
                    return [cast(BaseException, results[i]) for i in range(len(batch))]
                last = await conn.fetchval(
                    "UPDATE ct_meta SET value = value + $1 WHERE key = $2 RETURNING value",
                    written,
                    tables.CHANGE_SEQ,
                )
                if last is None:
                    raise asyncpg.UndefinedTableError("the board has no change counter")
            except BaseException:
                with contextlib.suppress(*ERRORS):
                    await transaction.rollback()
                raise
            try:
                await transaction.commit()
            except ERRORS as exc:
                raise CommitFailed() from exc
        seq = int(last) - written
        outcomes: list[Outcome] = []
        for index, item in enumerate(batch):  # changeSeq in arrival order
            result = results[index]
            if isinstance(result, BaseException):
                outcomes.append(result)
                continue
            committed = []
            for write, revision in zip(item.writes, result, strict=True):
                seq += 1
                committed.append(Committed(write.task, revision, seq))
            outcomes.append(committed)
        return outcomes


async def _item(conn: asyncpg.Connection, item: Item) -> list[int] | BaseException:
    if len(item.writes) == 1:
        try:
            return [await _write(conn, item.writes[0], item.rows[0])]
        except (RevisionConflict, IdempotencyKeyTaken) as refused:
            return refused
    savepoint = conn.transaction()
    await savepoint.start()
    try:
        revisions = [await _write(conn, w, r) for w, r in zip(item.writes, item.rows, strict=True)]
    except (RevisionConflict, IdempotencyKeyTaken) as refused:
        await savepoint.rollback()
        return refused
    await savepoint.commit()
    return revisions


async def _write(conn: asyncpg.Connection, write: Write, row: Columns) -> int:
    """One write; a refusal leaves nothing of it behind."""
    task = write.task
    key = write.idempotency
    history = (task.taskId, task.updatedAt, write.command, write.actor, task.status, write.note)
    values = (
        task.taskId,
        task.createdAt if write.expected_revision is None else write.expected_revision,
        *row,
    )
    if key is not None and write.expected_revision is not None:
        return await _remembered_update(conn, write, key, history, values)
    if key is not None:
        await _remember(conn, key, row.body, task.updatedAt)
    if write.expected_revision is None:
        done = await conn.fetchval(_CREATE, *history, *values)
        revision = 1
    else:
        revision = write.expected_revision + 1
        done = await conn.fetchval(_UPDATE, *history, *values, revision)
    if done is None:
        if key is not None:  # undo this write's own idempotency row
            await conn.execute("DELETE FROM ct_idempotency WHERE key = $1", key.key)
        raise RevisionConflict(task.taskId)
    return revision


async def _remembered_update(
    conn: asyncpg.Connection,
    write: Write,
    key: IdempotencyKey,
    history: tuple[Any, ...],
    values: tuple[Any, ...],
) -> int:
    """An update with its envelope id's result: one round trip, unless the id is taken
    (then its expired result is forgotten and the write tried once more, or refused)."""
    assert write.expected_revision is not None
    revision = write.expected_revision + 1
    args = (*history, *values, revision, key.key, key.command, key.args_digest)
    remembered, swapped = await conn.fetchrow(_REMEMBERED_UPDATE, *args)
    if not remembered:
        if await conn.execute(_FORGET_EXPIRED, key.key, key.expired_before) == "DELETE 0":
            raise IdempotencyKeyTaken(key.key)
        remembered, swapped = await conn.fetchrow(_REMEMBERED_UPDATE, *args)
        if not remembered:
            raise IdempotencyKeyTaken(key.key)
    if not swapped:  # undo this write's own idempotency row
        await conn.execute("DELETE FROM ct_idempotency WHERE key = $1", key.key)
        raise RevisionConflict(write.task.taskId)
    return revision


async def _remember(conn: asyncpg.Connection, key: IdempotencyKey, body: str, at: int) -> None:
    """The envelope id's result, or ``IdempotencyKeyTaken`` (an expired one is replaced)."""
    remember = (key.key, key.command, key.args_digest, body, at)
    if await conn.fetchval(_REMEMBER, *remember) is None:
        # Taken, unless the result there has expired (an id is forgotten in time).
        if await conn.execute(_FORGET_EXPIRED, key.key, key.expired_before) == "DELETE 0":
            raise IdempotencyKeyTaken(key.key)
        if await conn.fetchval(_REMEMBER, *remember) is None:
            raise IdempotencyKeyTaken(key.key)
