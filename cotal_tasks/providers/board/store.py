"""The self-hosted board: the store port on SQLAlchemy 2 Core (async).

One code path for SQLite (WAL, the embedded default) and PostgreSQL (several bridge
instances on one database). Writes are compare-and-swap on ``revision``; each commit
writes the record, its history entry, the idempotency result and the change counter
in one transaction. Every database failure becomes ``unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import event, insert, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from cotal_tasks.core import ContractError, ErrorCode, StaleMarker, Task, TaskSummary
from cotal_tasks.providers.board import schema
from cotal_tasks.providers.board.cache import ReadCache, SoleWriterLock
from cotal_tasks.providers.board.migrate import upgrade
from cotal_tasks.providers.board.state import MirrorState
from cotal_tasks.providers.store import (
    Committed,
    HistoryEntry,
    IdempotencyKey,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    Page,
    PageQuery,
    RevisionConflict,
    StoredTask,
    Write,
)

_M = TypeVar("_M", Task, TaskSummary)
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_CONNECT_TIMEOUT_S = 5


def normalize_url(url: str) -> URL:
    """Accept ``sqlite:///path`` and ``postgresql://…`` and pick the async driver."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "the board URL is not a database URL; use sqlite:///PATH or "
            "postgresql://USER@HOST:PORT/DATABASE",
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in _DRIVERS:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"the board supports sqlite and postgresql, not {backend!r}; "
            "use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE",
        )
    return parsed.set(drivername=_DRIVERS[backend])


def _unavailable(where: str, exc: BaseException) -> ContractError:
    reason = type(exc).__name__
    orig = getattr(exc, "orig", None)
    if orig is not None:
        reason = f"{type(orig).__name__}: {str(orig).splitlines()[0][:200]}"
    return ContractError(
        ErrorCode.UNAVAILABLE,
        f"the board store cannot be read ({where}: {reason}); check that the database is "
        "running and reachable and that the file is a readable board, then retry",
    )


class BoardStore:
    """A ``TaskStore`` over one SQL database."""

    def __init__(
        self, engine: AsyncEngine, *, label: str, sole_writer: SoleWriterLock | None = None
    ) -> None:
        self._engine = engine
        self._label = label
        self._sqlite = engine.dialect.name == "sqlite"
        # One writer at a time per process on SQLite; PostgreSQL serializes on row locks.
        self._write_lock = asyncio.Lock() if self._sqlite else None
        # Only a process that holds the sole-writer lock may trust a cache of the file.
        self._sole_writer = sole_writer
        self._cache = ReadCache() if sole_writer is not None else None

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True, serve: bool = False) -> BoardStore:
        """Connect, apply migrations, and return the store (``unavailable`` on failure).

        ``serve`` marks the process that serves the board: on SQLite it takes the
        sole-writer lock (refusing a second server of the same file) and caches reads.
        """
        parsed = normalize_url(url)
        sole_writer = None
        if (
            serve
            and parsed.get_backend_name() == "sqlite"
            and parsed.database
            not in (
                None,
                "",
                ":memory:",
            )
        ):
            sole_writer = SoleWriterLock(parsed.database)
        connect_args: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                await asyncio.to_thread(_ensure_folder, parsed.database)
            connect_args["timeout"] = 30
        else:
            connect_args["timeout"] = _CONNECT_TIMEOUT_S
        engine = create_async_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
        if parsed.get_backend_name() == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        if sole_writer is not None:
            try:
                await asyncio.to_thread(sole_writer.acquire)
            except ContractError:
                await engine.dispose()
                raise
        store = cls(
            engine, label=parsed.render_as_string(hide_password=True), sole_writer=sole_writer
        )
        if migrate:
            try:
                async with engine.begin() as conn:
                    await conn.run_sync(upgrade)
            except (SQLAlchemyError, OSError, TimeoutError) as exc:
                await store.close()
                raise _unavailable("migrating the schema", exc) from exc
        return store

    def state(self) -> MirrorState:
        """Checkpoints and webhook deliveries, for a hosted tracker mirroring into this board."""
        return MirrorState(self._engine)

    @property
    def label(self) -> str:
        """The database URL without its password, for logs and health output."""
        return self._label

    @contextlib.asynccontextmanager
    async def _read(self, where: str) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.connect() as conn:
                yield conn
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise _unavailable(where, exc) from exc

    async def get(self, task_id: str) -> StoredTask:
        if self._cache is not None and (cached := self._cache.get(task_id)) is not None:
            return cached
        async with self._read("reading a task") as conn:
            row = (
                await conn.execute(
                    select(schema.tasks.c.body, schema.tasks.c.revision).where(
                        schema.tasks.c.task_id == task_id
                    )
                )
            ).first()
        if row is None:
            raise ContractError(
                ErrorCode.NOT_FOUND,
                f"no task {task_id!r} on this board; list-tasks shows the task ids there are",
            )
        stored = StoredTask(_decode(Task, row.body), row.revision)
        if self._cache is not None:
            self._cache.put(stored)
        return stored

    async def get_many(self, task_ids: Sequence[str]) -> dict[str, StoredTask]:
        """The tasks of ``task_ids`` that exist, in one read (cached ones from the cache)."""
        found: dict[str, StoredTask] = {}
        missing: list[str] = []
        for task_id in task_ids:
            cached = self._cache.get(task_id) if self._cache is not None else None
            if cached is not None:
                found[task_id] = cached
            else:
                missing.append(task_id)
        t = schema.tasks
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            async with self._read("reading tasks") as conn:
                rows = (
                    await conn.execute(
                        select(t.c.task_id, t.c.body, t.c.revision).where(t.c.task_id.in_(chunk))
                    )
                ).all()
            for row in rows:
                stored = StoredTask(_decode(Task, row.body), row.revision)
                found[row.task_id] = stored
                if self._cache is not None:
                    self._cache.put(stored)
        return found

    async def page(self, query: PageQuery) -> Page:
        t = schema.tasks
        stmt = select(t.c.seq, t.c.summary).order_by(t.c.seq).limit(query.limit + 1)
        if query.after is not None:
            stmt = stmt.where(t.c.seq > query.after)
        if query.statuses is not None:
            stmt = stmt.where(t.c.status.in_(sorted(query.statuses)))
        if query.bound_to is not None:
            seat = query.bound_to
            stmt = stmt.where(
                t.c.bound_owner == seat.owner,
                t.c.bound_actor == seat.actor,
                t.c.bound_uid == seat.lifecycleUid,
            )
        async with self._read("reading a page") as conn:
            rows = (await conn.execute(stmt)).all()
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        tasks = [_decode(TaskSummary, row.summary) for row in rows]
        return Page(tasks, rows[-1].seq if rows else query.after, more)

    async def commit(self, write: Write) -> Committed:
        return (await self.commit_many([write]))[0]

    async def commit_many(self, writes: Sequence[Write]) -> list[Committed]:
        """Commit several writes in one transaction: all of them, or none.

        Each is a full write (compare-and-swap, history, idempotency result) and each
        advances ``changeSeq`` by one; a sync mirroring a page of issues uses it so a page
        costs one transaction, not one per issue.
        """
        if not writes:
            return []
        if self._write_lock is None:
            return await self._commit(writes)
        async with self._write_lock:
            return await self._commit(writes)

    async def _commit(self, writes: Sequence[Write]) -> list[Committed]:
        revisions: list[int] = []
        try:
            async with self._engine.begin() as conn:
                for write in writes:
                    revisions.append(await self._write_one(conn, write))
                change_seq = int(
                    (
                        await conn.execute(
                            update(schema.meta)
                            .where(schema.meta.c.key == schema.CHANGE_SEQ)
                            .values(value=schema.meta.c.value + len(writes))
                            .returning(schema.meta.c.value)
                        )
                    ).scalar_one()
                )
        except (RevisionConflict, IdempotencyKeyTaken):
            raise
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise _unavailable("writing a task", exc) from exc
        first = change_seq - len(writes) + 1
        committed = [
            Committed(write.task, revision, first + index)
            for index, (write, revision) in enumerate(zip(writes, revisions, strict=True))
        ]
        if self._cache is not None:
            for item in committed:
                self._cache.put(StoredTask(item.task, item.revision))
            self._cache.change_seq = change_seq
        return committed

    async def _write_one(self, conn: AsyncConnection, write: Write) -> int:
        task = write.task
        binding = task.binding
        columns: dict[str, Any] = {
            "status": task.status,
            "bound_owner": binding.owner if binding else None,
            "bound_actor": binding.actor if binding else None,
            "bound_uid": binding.lifecycleUid if binding else None,
            "body": json.dumps(task.to_json(), separators=(",", ":"), ensure_ascii=False),
            "summary": json.dumps(
                task.summary().to_json(), separators=(",", ":"), ensure_ascii=False
            ),
            "updated_at": task.updatedAt,
        }
        if write.idempotency is not None:
            await self._remember(conn, write.idempotency, columns["body"], task.updatedAt)
        revision = await self._put(conn, write, columns)
        await conn.execute(
            insert(schema.history).values(
                task_id=task.taskId,
                at=task.updatedAt,
                command=write.command,
                actor=write.actor,
                status=task.status,
                note=write.note,
            )
        )
        return revision

    async def _remember(
        self, conn: AsyncConnection, record: IdempotencyKey, result: str, now: int
    ) -> None:
        i = schema.idempotency
        await conn.execute(
            i.delete().where(i.c.key == record.key, i.c.created_at < record.expired_before)
        )
        try:
            async with conn.begin_nested():
                await conn.execute(
                    insert(schema.idempotency).values(
                        key=record.key,
                        command=record.command,
                        args_digest=record.args_digest,
                        result=result,
                        created_at=now,
                    )
                )
        except IntegrityError as exc:
            raise IdempotencyKeyTaken(record.key) from exc

    async def _put(self, conn: AsyncConnection, write: Write, columns: dict[str, Any]) -> int:
        t = schema.tasks
        if write.expected_revision is None:
            try:
                async with conn.begin_nested():
                    await conn.execute(
                        insert(t).values(
                            task_id=write.task.taskId,
                            revision=1,
                            created_at=write.task.createdAt,
                            **columns,
                        )
                    )
            except IntegrityError as exc:
                raise RevisionConflict(write.task.taskId) from exc
            return 1
        revision = write.expected_revision + 1
        result = await conn.execute(
            update(t)
            .where(t.c.task_id == write.task.taskId, t.c.revision == write.expected_revision)
            .values(revision=revision, **columns)
        )
        if result.rowcount != 1:
            raise RevisionConflict(write.task.taskId)
        return revision

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        i = schema.idempotency
        async with self._read("reading an idempotency result") as conn:
            row = (
                await conn.execute(
                    select(i.c.command, i.c.args_digest, i.c.result).where(
                        i.c.key == key, i.c.created_at >= not_before
                    )
                )
            ).first()
        if row is None:
            return None
        return IdempotencyRecord(key, row.command, row.args_digest, row.result)

    async def prune(self, before: int) -> int:
        i = schema.idempotency
        try:
            async with self._engine.begin() as conn:
                result = await conn.execute(i.delete().where(i.c.created_at < before))
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise _unavailable("pruning idempotency results", exc) from exc
        return int(result.rowcount)

    async def change_seq(self) -> int:
        if self._cache is not None and self._cache.change_seq is not None:
            return self._cache.change_seq
        async with self._read("reading the change counter") as conn:
            value = (
                await conn.execute(
                    select(schema.meta.c.value).where(schema.meta.c.key == schema.CHANGE_SEQ)
                )
            ).scalar_one_or_none()
        if value is None:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                "the board has no change counter; its schema is incomplete. "
                "Restart the bridge so it applies the migrations",
            )
        if self._cache is not None:
            self._cache.change_seq = int(value)
        return int(value)

    async def freshness(self) -> StaleMarker | None:
        return None  # the board is its own source of truth

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        h = schema.history
        stmt = select(h).where(h.c.task_id == task_id).order_by(h.c.id).limit(limit)
        async with self._read("reading history") as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            HistoryEntry(row.task_id, row.at, row.command, row.actor, row.status, row.note)
            for row in rows
        ]

    async def close(self) -> None:
        await self._engine.dispose()
        if self._cache is not None:
            self._cache.clear()
        if self._sole_writer is not None:
            self._sole_writer.release()


def _ensure_folder(database: str) -> None:
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _decode(model: type[_M], body: str) -> _M:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            "a stored task record does not validate; the board's data is damaged. "
            "Restore it from a backup, or fix the row with the operator tools",
        ) from exc
