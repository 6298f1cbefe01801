"""A PostgreSQL board's hot path on asyncpg directly: one round trip per read, and
group-committed writes of one statement per batch.

SQLAlchemy's async layer costs a transaction and a pool ping per read (several round
trips); here a read is one prepared statement on a pooled connection. A batch of lone
writes (every command's) is one set-based statement (``_TOGETHER``): the batch's columns
as arrays, each write's compare-and-swap, history row and envelope id's result, and the
change counter, with each write's outcome (swapped, refused, its id taken) in the answer;
so a batch costs ``BEGIN``, that statement and ``COMMIT`` whatever its size. A later write
of a task (or an envelope id) already in the batch follows that statement on its own, so
it sees the first's effect (the second write of one task is a revision conflict).
One by one, a write is one statement that compare-and-swaps the task and appends its
history row; an update that records its envelope id's result does that in the same
statement (``INSERT … ON CONFLICT DO NOTHING``, the swap only when it was recorded), and
a new task's result goes first, on its own. None raises on a refusal, so a refused write
is undone by deleting its own idempotency row, without a savepoint.
A call of several writes (a mirror's page) runs in a savepoint, and its batch one by one.
Items take their row locks in task-id order, so two instances' batches do not deadlock
on each other.
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
    result_reference,
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
    "created_at) VALUES ($17, $18, $19, $20, $15) ON CONFLICT (key) DO NOTHING RETURNING 1), "
    "put AS (UPDATE ct_tasks SET revision = $16, status = $9, bound_owner = $10, "
    "bound_actor = $11, bound_uid = $12, body = $13, summary = $14, updated_at = $15 "
    "WHERE task_id = $7 AND revision = $8 AND EXISTS (SELECT 1 FROM remember) RETURNING 1), "
    "history AS (INSERT INTO ct_history (task_id, at, command, actor, status, note) "
    "SELECT $1, $2, $3, $4, $5, $6 FROM put RETURNING 1) "
    "SELECT EXISTS (SELECT 1 FROM remember), EXISTS (SELECT 1 FROM history)"
)


# A batch of lone writes (distinct tasks, distinct envelope ids) in one statement, set-based:
# the batch's columns as arrays, ``unnest``ed. The rows to swap are locked first, in task-id
# order (so two instances' batches do not deadlock); a write whose envelope id holds a
# result that has not expired is refused (``free`` leaves it out); the others swap (or
# insert) their task; only a write that did records its result and its history row, so a
# refused swap leaves nothing behind. One envelope id recorded by another transaction
# after this statement's snapshot shows as a result not recorded (``remember`` counts
# fewer rows than the writes with an id): the caller then rolls back. The change counter
# advances here only when this statement is the batch's only write (``$20``).
_TOGETHER = (
    "WITH input AS MATERIALIZED (SELECT * FROM unnest($1::int[], $2::text[], $3::int[], "
    "$4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], "
    "$11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], "
    "$17::text[], $18::bigint[]) AS i (ord, task_id, expected, created_at, status, "
    "bound_owner, bound_actor, bound_uid, body, summary, updated_at, command, actor, note, "
    "key, key_command, args_digest, expired_before)), "
    "locked AS MATERIALIZED (SELECT task_id FROM ct_tasks WHERE task_id IN "
    "(SELECT task_id FROM input WHERE expected IS NOT NULL) ORDER BY task_id FOR UPDATE), "
    "free AS MATERIALIZED (SELECT * FROM input i WHERE (SELECT count(*) FROM locked) >= 0 "
    "AND (i.key IS NULL OR NOT EXISTS (SELECT 1 FROM ct_idempotency d "
    "WHERE d.key = i.key AND d.created_at >= i.expired_before))), "
    "put AS (UPDATE ct_tasks t SET revision = f.expected + 1, status = f.status, "
    "bound_owner = f.bound_owner, bound_actor = f.bound_actor, bound_uid = f.bound_uid, "
    "body = f.body, summary = f.summary, updated_at = f.updated_at FROM free f "
    "WHERE f.expected IS NOT NULL AND t.task_id = f.task_id AND t.revision = f.expected "
    "RETURNING f.ord), "
    "made AS (INSERT INTO ct_tasks (task_id, revision, created_at, status, bound_owner, "
    "bound_actor, bound_uid, body, summary, updated_at) SELECT task_id, 1, created_at, "
    "status, bound_owner, bound_actor, bound_uid, body, summary, updated_at FROM free "
    "WHERE expected IS NULL ORDER BY task_id ON CONFLICT (task_id) DO NOTHING "
    "RETURNING task_id), "
    "done AS MATERIALIZED (SELECT ord FROM put UNION ALL "
    "SELECT i.ord FROM made JOIN input i USING (task_id)), "
    "remember AS (INSERT INTO ct_idempotency (key, command, args_digest, result, created_at) "
    "SELECT i.key, i.key_command, i.args_digest, json_build_object('taskId', i.task_id, "
    "'revision', COALESCE(i.expected + 1, 1))::text, i.updated_at FROM input i "
    "JOIN done USING (ord) WHERE i.key IS NOT NULL "
    "ON CONFLICT (key) DO UPDATE SET command = excluded.command, "
    "args_digest = excluded.args_digest, result = excluded.result, "
    "created_at = excluded.created_at WHERE ct_idempotency.created_at < "
    "(SELECT i.expired_before FROM input i WHERE i.key = excluded.key) RETURNING 1), "
    "history AS (INSERT INTO ct_history (task_id, at, command, actor, status, note) "
    "SELECT i.task_id, i.updated_at, i.command, i.actor, i.status, i.note FROM input i "
    "JOIN done USING (ord) ORDER BY i.ord RETURNING 1), "
    "counter AS (UPDATE ct_meta SET value = value + (SELECT count(*) FROM done) "
    "WHERE key = $19 AND $20::boolean AND EXISTS (SELECT 1 FROM done) RETURNING value) "
    "SELECT ARRAY(SELECT ord FROM free), ARRAY(SELECT ord FROM done), "
    "(SELECT count(*) FROM remember), (SELECT value FROM counter)"
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
        async with self._pool.acquire() as conn:
            try:
                return await _transaction(conn, batch, together=True)
            except _Raced:  # an envelope id taken meanwhile: the batch again, one by one
                return await _transaction(conn, batch, together=False)


class _Raced(Exception):
    """Another transaction recorded an envelope id of the batch while its statement ran
    (after the statement's snapshot): the batch is rolled back and written one by one."""


async def _transaction(
    conn: asyncpg.Connection, batch: list[Item], together: bool
) -> list[Outcome]:
    """The batch in one transaction: its writes and the change counter, then ``COMMIT``."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        results, last = await _writes(conn, batch, together)
        written = sum(len(batch[i].writes) for i, r in results.items() if type(r) is list)
        if written == 0:
            await transaction.rollback()
            return [cast(BaseException, results[i]) for i in range(len(batch))]
        if last is None:
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


Results = dict[int, list[int] | BaseException]


async def _writes(
    conn: asyncpg.Connection, batch: list[Item], together: bool
) -> tuple[Results, int | None]:
    """Each item's revisions or refusal, and the change counter when it was advanced
    already (by the set-based statement, when it carried the whole batch).

    A batch of lone writes (every command's) is one statement, ``_TOGETHER``, for the
    first write of each task and of each envelope id; a later write of a task or an id
    already in the batch follows it on its own, so it sees the first's effect: the second
    write of one task in a batch is a revision conflict, as it would be one after the
    other. A call of several writes (a mirror's page) sends the batch one item at a time.
    """
    order = sorted(range(len(batch)), key=lambda i: [w.task.taskId for w in batch[i].writes])
    results: Results = {}
    if not together or any(len(item.writes) != 1 for item in batch):
        for index in order:
            results[index] = await _item(conn, batch[index])
        return results, None
    first: list[int] = []
    later: list[int] = []
    tasks: set[str] = set()
    keys: set[str] = set()
    for index, item in enumerate(batch):
        write = item.writes[0]
        key = write.idempotency.key if write.idempotency is not None else None
        if write.task.taskId in tasks or (key is not None and key in keys):
            later.append(index)
            continue
        first.append(index)
        tasks.add(write.task.taskId)
        if key is not None:
            keys.add(key)
    last = await _together(conn, batch, first, results, advance=not later)
    for index in order:
        if index in results:
            continue
        results[index] = await _item(conn, batch[index])
    return results, last


async def _together(
    conn: asyncpg.Connection,
    batch: list[Item],
    indices: list[int],
    results: Results,
    advance: bool,
) -> int | None:
    """The lone writes of ``indices`` (distinct tasks, distinct envelope ids) in one
    statement; each one's outcome into ``results``. With ``advance``, the statement also
    advances the change counter and returns its new value."""
    columns: list[list[Any]] = [[] for _ in range(18)]
    for index in indices:
        write = batch[index].writes[0]
        row = batch[index].rows[0]
        task = write.task
        key = write.idempotency
        values = (
            index,
            task.taskId,
            write.expected_revision,
            task.createdAt,
            *row,
            write.command,
            write.actor,
            write.note,
            None if key is None else key.key,
            None if key is None else key.command,
            None if key is None else key.args_digest,
            None if key is None else key.expired_before,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    free, done, remembered, last = await conn.fetchrow(
        _TOGETHER, *columns, tables.CHANGE_SEQ, advance
    )
    free_set, done_set = set(free), set(done)
    with_keys = sum(1 for i in done_set if batch[i].writes[0].idempotency is not None)
    if remembered != with_keys:
        raise _Raced()
    for index in indices:
        write = batch[index].writes[0]
        if index not in free_set:
            assert write.idempotency is not None
            results[index] = IdempotencyKeyTaken(write.idempotency.key)
        elif index not in done_set:
            results[index] = RevisionConflict(write.task.taskId)
        elif write.expected_revision is None:
            results[index] = [1]
        else:
            results[index] = [write.expected_revision + 1]
    return None if last is None else int(last)


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
        await _remember(conn, key, result_reference(task.taskId, 1), task.updatedAt)
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
    result = result_reference(write.task.taskId, revision)
    args = (*history, *values, revision, key.key, key.command, key.args_digest, result)
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


async def _remember(conn: asyncpg.Connection, key: IdempotencyKey, result: str, at: int) -> None:
    """The envelope id's result, or ``IdempotencyKeyTaken`` (an expired one is replaced)."""
    remember = (key.key, key.command, key.args_digest, result, at)
    if await conn.fetchval(_REMEMBER, *remember) is None:
        # Taken, unless the result there has expired (an id is forgotten in time).
        if await conn.execute(_FORGET_EXPIRED, key.key, key.expired_before) == "DELETE 0":
            raise IdempotencyKeyTaken(key.key)
        if await conn.fetchval(_REMEMBER, *remember) is None:
            raise IdempotencyKeyTaken(key.key)
