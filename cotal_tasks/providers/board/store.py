"""The self-hosted board: the store port for SQLite (WAL, the embedded default) and
PostgreSQL (several bridge instances on one database).

Writes are compare-and-swap on ``revision``; each write lands with its history entry,
its idempotency result and the change counter in one transaction, and writes that
arrive together share that transaction (group commit). A SQLite file is read and
written through Python's ``sqlite3`` (``sqlite.py``: reads on the loop's thread, one
writer thread), a PostgreSQL board through asyncpg directly (``postgres.py``); the
migrations, the mirror's state and the cold paths (history, pruning) go through
SQLAlchemy 2 Core (async). Every database failure becomes ``unavailable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import event, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from cotal_tasks.core import ContractError, ErrorCode, StaleMarker, Task, TaskSummary
from cotal_tasks.files import private_dir, private_file
from cotal_tasks.providers.board import tables
from cotal_tasks.providers.board.cache import ReadCache, SoleWriterLock
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.board.claim import claim, shared, sqlite_claim
from cotal_tasks.providers.board.migrate import upgrade, upgrade_sqlite
from cotal_tasks.providers.board.postgres import ERRORS as POSTGRES_ERRORS
from cotal_tasks.providers.board.postgres import PostgresBoard
from cotal_tasks.providers.board.records import (
    Decoded,
    damaged,
    reason_of,
    stored_json,
    unavailable,
)
from cotal_tasks.providers.board.sqlite import BUSY_TIMEOUT_MS, PRAGMAS, SqliteFile
from cotal_tasks.providers.store import (
    Committed,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    IdempotencyRecord,
    JsonPage,
    Page,
    PageQuery,
    RecordPage,
    StoredTask,
    SyncState,
    Write,
    task_not_found,
)

_M = TypeVar("_M", Task, TaskSummary)
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
CONNECT_TIMEOUT_S = 5.0  # a connection's deadline (the config's database_connect_timeout_s)


def normalize_url(url: str) -> URL:
    """Accept ``sqlite:///path`` and ``postgresql://…`` and pick the async driver."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "the board URL is not a database URL. Use sqlite:///PATH or "
            "postgresql://USER@HOST:PORT/DATABASE",
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in _DRIVERS:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"the board supports sqlite and postgresql, not {backend!r}. "
            "Use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE",
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "a board lives in a file, not in memory (an in-memory board would lose every "
            "acknowledged write on exit). Use sqlite:///PATH",
        )
    return parsed.set(drivername=_DRIVERS[backend])


_unavailable = unavailable


class BoardUnreachable(ContractError):
    """The board's database could not be opened: ``reason`` says how (no answer within the
    deadline, a refusal). The bridge names the endpoint's ``database`` key beside it."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, _unavailable("opening the board", reason).message)
        self.reason = reason
        self.timed_out = timed_out


def _unreachable(exc: BaseException, timeout_s: float) -> BoardUnreachable:
    orig = getattr(exc, "orig", None)
    timed_out = isinstance(exc, TimeoutError) or isinstance(orig, TimeoutError)
    if timed_out:
        return BoardUnreachable(f"no answer within {timeout_s:g} s", timed_out=True)
    return BoardUnreachable(reason_of(exc))


_OPEN_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError, *POSTGRES_ERRORS)
_CLAIM_OR_OPEN_ERRORS: tuple[type[BaseException], ...] = (*_OPEN_ERRORS, ContractError)


class BoardStore:
    """A ``TaskStore`` (with ``JsonReads``) over one SQL database."""

    def __init__(
        self,
        engine: AsyncEngine,
        hot: SqliteFile | PostgresBoard,
        *,
        label: str,
        sole_writer: SoleWriterLock | None = None,
    ) -> None:
        self._engine = engine
        self._hot = hot
        self._label = label
        # Only a process that holds the sole-writer lock may trust a cache of the file.
        self._sole_writer = sole_writer
        self._cache = ReadCache(_decode_task) if sole_writer is not None else None
        self._decoded = Decoded()
        if isinstance(hot, SqliteFile):
            hot.on_commit = self._committed

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        serve: bool = False,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        endpoint: str | None = None,
    ) -> BoardStore:
        """Connect, apply migrations, and return the store (``BoardUnreachable``, an
        ``unavailable``, on failure). Each PostgreSQL connection must be made (the server
        answering its start-up) within ``connect_timeout_s``.

        ``serve`` marks the process that serves the board: on SQLite it takes the
        sole-writer lock (refusing a second server of the same file) and caches reads.
        ``endpoint`` names the endpoint the board is opened for: a database another
        endpoint has claimed is refused (``claim``), and one served unclaimed is claimed.
        """
        parsed = normalize_url(url)
        file = parsed.database if parsed.get_backend_name() == "sqlite" else None
        sole_writer = SoleWriterLock(file) if serve and file is not None else None
        connect_args: dict[str, Any] = {}
        if file is not None:
            await asyncio.to_thread(_ensure_folder, file)
            connect_args["timeout"] = BUSY_TIMEOUT_MS / 1000
        else:
            connect_args["timeout"] = connect_timeout_s
        # A PostgreSQL connection can go stale (the server restarted): each checkout pings
        # it first. A SQLite file's cannot, and the ping was a thread round trip a
        # checkout (a webhook's delivery record is one).
        engine = create_async_engine(parsed, pool_pre_ping=file is None, connect_args=connect_args)
        if file is not None:
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        label = parsed.render_as_string(hide_password=True)
        if file is not None and endpoint is not None:
            claimed = await asyncio.to_thread(sqlite_claim, file)
            if claimed is not None and claimed != endpoint:
                await engine.dispose()
                raise shared(label, claimed, endpoint)
        if sole_writer is not None:
            try:
                await asyncio.to_thread(sole_writer.acquire)
            except ContractError:
                await engine.dispose()
                raise
        try:
            if migrate and file is not None:
                await upgrade_sqlite(parsed, connect_args)
            elif migrate:
                async with engine.begin() as conn:
                    await conn.run_sync(upgrade)
            if endpoint is not None:
                await claim(engine, label, endpoint, write=serve and migrate)
            hot: SqliteFile | PostgresBoard
            if file is not None:
                hot = SqliteFile(file)  # the same path the engine opens
            else:
                dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
                hot = await PostgresBoard.connect(dsn, connect_timeout_s)
        except _CLAIM_OR_OPEN_ERRORS as exc:
            await engine.dispose()
            if sole_writer is not None:
                sole_writer.release()
            if isinstance(exc, ContractError):
                raise
            raise _unreachable(exc, connect_timeout_s) from exc
        return cls(engine, hot, label=label, sole_writer=sole_writer)

    def checkpoints(self) -> Checkpoints:
        """Checkpoints and webhook deliveries, for a hosted tracker mirroring into this board."""
        return Checkpoints(self._engine)

    @property
    def label(self) -> str:
        """The database URL without its password, for logs and health output."""
        return self._label

    async def _rows(self, where: str, sql: str, params: Sequence[Any] = ()) -> Sequence[Any]:
        """One read statement (``?`` placeholders) on the hot path."""
        if isinstance(self._hot, SqliteFile):
            return self._hot.rows(where, sql, params)
        return await self._hot.rows(where, sql, params)

    async def _row(self, task_id: str) -> tuple[str, int]:
        """The stored body and revision of ``task_id``, or ``not-found``."""
        if isinstance(self._hot, PostgresBoard):
            found = await self._hot.tasks.get(task_id)  # with the turn's other reads
            rows: Sequence[Any] = () if found is None else (found,)
        else:
            rows = self._hot.rows(
                "reading a task",
                "SELECT body, revision FROM ct_tasks WHERE task_id = ?",
                (task_id,),
            )
        if not rows:
            raise task_not_found(task_id)
        return rows[0][0], rows[0][1]

    async def get(self, task_id: str) -> StoredTask:
        if self._cache is not None and (cached := self._cache.get(task_id)) is not None:
            return cached
        body, revision = await self._row(task_id)
        stored = StoredTask(_decode(Task, body), revision)
        if self._cache is not None:
            self._cache.put(stored)
        return stored

    async def get_json(self, task_id: str) -> dict[str, Any]:
        if (cached := self.held_json(task_id)) is not None:
            return cached
        body, revision = await self._row(task_id)
        value = stored_json(body)
        if self._cache is not None:
            self._cache.put_json(task_id, revision, body, value)
        return value

    def held_json(self, task_id: str) -> dict[str, Any] | None:
        return None if self._cache is None else self._cache.get_json(task_id)

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
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = await self._rows(
                "reading tasks",
                f"SELECT task_id, body, revision FROM ct_tasks WHERE task_id IN ({marks})",
                chunk,
            )
            for task_id, body, revision in rows:
                stored = StoredTask(_decode(Task, body), revision)
                found[task_id] = stored
                if self._cache is not None:
                    self._cache.put(stored)
        return found

    async def _page_rows(
        self, query: PageQuery, column: str = "summary"
    ) -> tuple[Sequence[Any], bool]:
        sql, params = _page_sql(query, column)
        rows = await self._rows("reading a page", sql, params)
        return rows[: query.limit], len(rows) > query.limit

    async def page(self, query: PageQuery) -> Page:
        rows, more = await self._page_rows(query)
        tasks = [_decode(TaskSummary, summary) for _seq, summary in rows]
        return Page(tasks, rows[-1][0] if rows else query.after, more)

    async def page_json(self, query: PageQuery) -> JsonPage:
        rows, more = await self._page_rows(query)
        tasks = [self._decoded(summary) for _seq, summary in rows]
        return JsonPage(tasks, rows[-1][0] if rows else query.after, more)

    async def page_records(self, query: PageQuery) -> RecordPage:
        rows, more = await self._page_rows(query, "body")
        tasks = [_decode(Task, body) for _seq, body in rows]
        return RecordPage(tasks, rows[-1][0] if rows else query.after, more)

    async def page_records_json(self, query: PageQuery) -> JsonPage:
        rows, more = await self._page_rows(query, "body")
        tasks = [stored_json(body) for _seq, body in rows]
        return JsonPage(tasks, rows[-1][0] if rows else query.after, more)

    async def commit(self, write: Write) -> Committed:
        return (await self.commit_many([write]))[0]

    async def commit_many(self, writes: Sequence[Write]) -> list[Committed]:
        """Commit several writes in one transaction: all of them, or none.

        Each is a full write (compare-and-swap, history, idempotency result) and each
        advances ``changeSeq`` by one; a sync mirroring a page of issues uses it so a page
        costs one transaction, not one per issue. Calls that arrive together share a
        transaction (group commit), and a refused call never fails its neighbours.
        """
        if not writes:
            return []
        if isinstance(self._hot, SqliteFile):
            return await self._hot.commit(writes)  # the cache is refreshed on commit
        committed = await self._hot.group.commit(writes)
        self._committed(committed)
        return committed

    def _committed(self, committed: list[Committed]) -> None:
        """Refresh the read cache with what was just committed."""
        if self._cache is None or not committed:
            return
        for item in committed:
            self._cache.put(StoredTask(item.task, item.revision))
        self._cache.change_seq = max(committed[-1].change_seq, self._cache.change_seq or 0)

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        if isinstance(self._hot, PostgresBoard):
            found = await self._hot.results.get(key)  # with the turn's other reads
            if found is None or found[3] < not_before:
                return None
            return IdempotencyRecord(key, *found[:3])
        rows = self._hot.rows(
            "reading an idempotency result",
            "SELECT command, args_digest, result FROM ct_idempotency "
            "WHERE key = ? AND created_at >= ?",
            (key, not_before),
        )
        if not rows:
            return None
        command, args_digest, result = rows[0]
        return IdempotencyRecord(key, command, args_digest, result)

    async def prune(self, before: int, history_before: int | None = None) -> int:
        i, h = tables.idempotency, tables.history
        try:
            async with self._engine.begin() as conn:
                result = await conn.execute(i.delete().where(i.c.created_at < before))
                if history_before is not None:
                    await conn.execute(h.delete().where(h.c.at < history_before))
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise _unavailable("pruning idempotency results and history", exc) from exc
        return int(result.rowcount)

    async def change_seq(self) -> int:
        if self._cache is not None and self._cache.change_seq is not None:
            return self._cache.change_seq
        rows = await self._rows(
            "reading the change counter",
            "SELECT value FROM ct_meta WHERE key = ?",
            (tables.CHANGE_SEQ,),
        )
        if not rows:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                "the board has no change counter; its schema is incomplete. "
                "Restart the bridge so it applies the migrations",
            )
        value = int(rows[0][0])
        if self._cache is not None:
            self._cache.change_seq = value
        return value

    async def freshness(self) -> StaleMarker | None:
        return None  # the board is its own source of truth

    async def sync_state(self) -> SyncState | None:
        return None  # nothing to sync from

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        return (await self.history_page(HistoryQuery(limit=limit, task_id=task_id))).entries

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        h = tables.history
        stmt = select(h).order_by(h.c.id).limit(query.limit + 1)
        if query.after is not None:
            stmt = stmt.where(h.c.id > query.after)
        if query.task_id is not None:
            stmt = stmt.where(h.c.task_id == query.task_id)
        try:
            async with self._engine.connect() as conn:
                rows = (await conn.execute(stmt)).all()
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise _unavailable("reading history", exc) from exc
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        entries = [
            HistoryEntry(row.task_id, row.at, row.command, row.actor, row.status, row.note)
            for row in rows
        ]
        return HistoryPage(entries, int(rows[-1].id) if rows else query.after, more)

    async def close(self) -> None:
        if isinstance(self._hot, SqliteFile):
            await asyncio.to_thread(self._hot.close)
        else:
            await self._hot.close()
        await self._engine.dispose()
        if self._cache is not None:
            self._cache.clear()
        if self._sole_writer is not None:
            self._sole_writer.release()


def _ensure_folder(database: str) -> None:
    """The database's folder and the file itself, private to this user (0700, 0600)."""
    if not database or database == ":memory:":
        return
    path = Path(database).expanduser()
    private_dir(path.parent, narrow=False)  # the data directory is narrowed by the bridge
    private_file(path)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def _decode_task(body: str) -> Task:
    return _decode(Task, body)


def _decode(model: type[_M], body: str) -> _M:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise damaged() from exc


def _page_sql(query: PageQuery, column: str) -> tuple[str, list[Any]]:
    """The keyset page of ``column`` (``summary`` or ``body``): ``WHERE seq > :after
    ORDER BY seq`` on an index, one row extra."""
    where: list[str] = []
    params: list[Any] = []
    if query.after is not None:
        where.append("seq > ?")
        params.append(query.after)
    if query.statuses is not None:
        where.append(f"status IN ({', '.join('?' * len(query.statuses))})")
        params.extend(sorted(query.statuses))
    if query.bound_to is not None:
        seat = query.bound_to
        where.append("bound_owner = ? AND bound_actor = ? AND bound_uid = ?")
        params.extend((seat.owner, seat.actor, seat.lifecycleUid))
    sql = f"SELECT seq, {column} FROM ct_tasks"
    if where:
        sql += " WHERE " + " AND ".join(where)
    params.append(query.limit + 1)
    return sql + " ORDER BY seq LIMIT ?", params
