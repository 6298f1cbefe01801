"""A SQLite board file on Python's own ``sqlite3``: the board's hot path.

Reads run on the caller's thread (the event loop): a point read or a page is tens of
microseconds of C, less than the thread hop an async driver pays per statement. Writes
go to one writer thread, which commits what has arrived together in one transaction
(group commit): a refused write (a revision conflict, an idempotency key already taken)
is undone alone (a lone write deletes its own idempotency result, a call of several
writes rolls back to its savepoint) and its neighbours commit; each keeps its
compare-and-swap, history row, idempotency result and its own ``changeSeq``. A write is
answered only after ``COMMIT`` returned, with ``synchronous=FULL``, so every
acknowledged write is on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cotal_tasks.providers.board import tables
from cotal_tasks.providers.board.records import Columns, columns, unavailable
from cotal_tasks.providers.store import (
    Committed,
    IdempotencyKeyTaken,
    RevisionConflict,
    Write,
    result_reference,
)

log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 30_000
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
)
# The result of an envelope id, unless the id holds one that has not expired: one
# statement, which changes no row when the id is taken.
_REMEMBER = (
    "INSERT INTO ct_idempotency (key, command, args_digest, result, created_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET command = excluded.command, "
    "args_digest = excluded.args_digest, result = excluded.result, "
    "created_at = excluded.created_at WHERE ct_idempotency.created_at < ?"
)
_FORGET = "DELETE FROM ct_idempotency WHERE key = ?"
_INSERT_TASK = (
    "INSERT INTO ct_tasks (task_id, revision, created_at, status, bound_owner, bound_actor, "
    "bound_uid, body, summary, updated_at) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_TASK = (
    "UPDATE ct_tasks SET revision = ?, status = ?, bound_owner = ?, bound_actor = ?, "
    "bound_uid = ?, body = ?, summary = ?, updated_at = ? WHERE task_id = ? AND revision = ?"
)
_INSERT_HISTORY = (
    "INSERT INTO ct_history (task_id, at, command, actor, status, note) VALUES (?, ?, ?, ?, ?, ?)"
)

Outcome = list[Committed] | BaseException
OnCommit = Callable[[list[Committed]], None]


def connect(path: str) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) with the board's pragmas."""
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
    except sqlite3.Error:
        conn.close()
        raise
    return conn


@dataclass(slots=True)
class _Item:
    """One ``commit_many`` call: its writes commit together or not at all."""

    writes: Sequence[Write]
    rows: list[Columns]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[Committed]]


class SqliteFile:
    """Reads and group-committed writes of one board file."""

    def __init__(self, path: str, on_commit: OnCommit | None = None) -> None:
        self.path = path
        self.on_commit = on_commit
        self._reader: sqlite3.Connection | None = None
        self._writer: _Writer | None = None
        self._turns: dict[asyncio.AbstractEventLoop, list[_Item]] = {}  # not yet handed over
        self._lock = threading.Lock()

    def rows(self, where: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one read statement to completion; ``unavailable`` on any database failure."""
        try:
            conn = self._reader
            if conn is None:
                conn = self._reader = connect(self.path)
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self._drop_reader()  # the next read opens the file anew
            raise unavailable(where, exc) from exc

    async def commit(self, writes: Sequence[Write]) -> list[Committed]:
        loop = asyncio.get_running_loop()
        item = _Item(writes, [columns(w.task) for w in writes], loop, loop.create_future())
        with self._lock:
            turn = self._turns.get(loop)
            if turn is None:
                self._turns[loop] = [item]
                loop.call_soon(self._hand_over, loop)
            else:
                turn.append(item)
        return await item.future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """The writes of one turn of ``loop``, to the writer as one entry.

        Requests that reach their commit in the same turn of the event loop (the replies
        of one socket read wake them together) so share a transaction: the writer, which
        commits whatever has arrived as soon as it is free, would otherwise often take the
        first alone while the rest are still being queued.
        """
        with self._lock:
            items = self._turns.pop(loop, None)
            if not items:
                return
            if self._writer is None:
                self._writer = _Writer(self.path, self.on_commit)
            self._writer.queue.put(items)

    def close(self) -> None:
        """Finish the queued writes, stop the writer and close the connections (blocking)."""
        with self._lock:
            waiting = [item for turn in self._turns.values() for item in turn]
            self._turns.clear()
            if waiting and self._writer is None:
                self._writer = _Writer(self.path, self.on_commit)
            writer, self._writer = self._writer, None
            if writer is not None and waiting:
                writer.queue.put(waiting)
        if writer is not None:
            writer.stop()
        self._drop_reader()

    def _drop_reader(self) -> None:
        conn, self._reader = self._reader, None
        if conn is not None:
            conn.close()


class _Writer:
    """The one thread that writes the file, a batch of queued items per transaction."""

    def __init__(self, path: str, on_commit: OnCommit | None) -> None:
        self.path = path
        self.on_commit = on_commit
        self.queue: queue.SimpleQueue[list[_Item] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="board-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        running = True
        while running:
            first = self.queue.get()
            if first is None:
                break
            batch = list(first)
            while True:  # everything that arrived while the last batch was committing
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    running = False
                    break
                batch.extend(more)
            try:
                if conn is None:
                    conn = connect(self.path)
                outcomes = _commit_batch(conn, batch)
            except Exception as exc:  # never leave a waiting writer without an answer
                if not isinstance(exc, sqlite3.Error):
                    log.error("a board write failed unexpectedly", exc_info=exc)
                outcomes = [unavailable("writing a task", exc) for _ in batch]
                if conn is not None:
                    conn.close()
                    conn = None  # reopen for the next batch
            _deliver(batch, outcomes, self.on_commit)
        if conn is not None:
            conn.close()


def _commit_batch(conn: sqlite3.Connection, batch: list[_Item]) -> list[Outcome]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT value FROM ct_meta WHERE key = ?", (tables.CHANGE_SEQ,)
        ).fetchone()
        if row is None:
            raise sqlite3.OperationalError("the board has no change counter; restart to migrate")
        start = seq = int(row[0])
        outcomes: list[Outcome] = []
        for item in batch:
            try:
                revisions = _write_item(conn, item)
            except (RevisionConflict, IdempotencyKeyTaken) as refused:
                outcomes.append(refused)
                continue
            committed = []
            for write, revision in zip(item.writes, revisions, strict=True):
                seq += 1
                committed.append(Committed(write.task, revision, seq))
            outcomes.append(committed)
        if seq == start:
            conn.execute("ROLLBACK")  # every write was refused: nothing to make durable
            return outcomes
        conn.execute("UPDATE ct_meta SET value = ? WHERE key = ?", (seq, tables.CHANGE_SEQ))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the caller reopens the connection
                conn.execute("ROLLBACK")
        raise
    return outcomes


def _write_item(conn: sqlite3.Connection, item: _Item) -> list[int]:
    """One call's writes, whole or not at all; a refusal leaves nothing of it behind.

    A lone write (every command's) undoes itself: its only statement before the
    compare-and-swap is its idempotency result, deleted again when the swap is refused.
    Several writes (a mirror's page) share a savepoint.
    """
    if len(item.writes) == 1:
        return [_write_one(conn, item.writes[0], item.rows[0])]
    conn.execute("SAVEPOINT item")
    try:
        revisions = [_write_one(conn, w, r) for w, r in zip(item.writes, item.rows, strict=True)]
    except (RevisionConflict, IdempotencyKeyTaken):
        conn.execute("ROLLBACK TO item")
        conn.execute("RELEASE item")
        raise
    conn.execute("RELEASE item")
    return revisions


def _write_one(conn: sqlite3.Connection, write: Write, row: Columns) -> int:
    task = write.task
    key = write.idempotency
    if key is not None:
        made = 1 if write.expected_revision is None else write.expected_revision + 1
        result = result_reference(task.taskId, made)
        remember = (key.key, key.command, key.args_digest, result, task.updatedAt)
        if conn.execute(_REMEMBER, (*remember, key.expired_before)).rowcount != 1:
            raise IdempotencyKeyTaken(key.key)
    try:
        revision = _swap(conn, write, row)
    except RevisionConflict:
        if key is not None:  # undo this write's own idempotency result
            conn.execute(_FORGET, (key.key,))
        raise
    conn.execute(
        _INSERT_HISTORY,
        (task.taskId, task.updatedAt, write.command, write.actor, task.status, write.note),
    )
    return revision


def _swap(conn: sqlite3.Connection, write: Write, row: Columns) -> int:
    """The task's row: inserted (a new task) or compare-and-swapped on its revision."""
    task = write.task
    if write.expected_revision is None:
        try:
            conn.execute(_INSERT_TASK, (task.taskId, task.createdAt, *row))
        except sqlite3.IntegrityError:
            raise RevisionConflict(task.taskId) from None
        return 1
    revision = write.expected_revision + 1
    cursor = conn.execute(_UPDATE_TASK, (revision, *row, task.taskId, write.expected_revision))
    if cursor.rowcount != 1:
        raise RevisionConflict(task.taskId)
    return revision


def _deliver(batch: list[_Item], outcomes: list[Outcome], on_commit: OnCommit | None) -> None:
    """Hand each item its outcome on its own event loop, one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Item, Outcome]]] = {}
    for item, outcome in zip(batch, outcomes, strict=True):
        by_loop.setdefault(item.loop, []).append((item, outcome))
    for loop, pairs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_resolve, pairs, on_commit)


def _resolve(pairs: list[tuple[_Item, Outcome]], on_commit: OnCommit | None) -> None:
    for item, outcome in pairs:
        if isinstance(outcome, BaseException):
            if not item.future.done():
                item.future.set_exception(outcome)
            continue
        if on_commit is not None:
            on_commit(outcome)  # before the writer resumes, so no read sees an older cache
        if not item.future.done():
            item.future.set_result(outcome)
