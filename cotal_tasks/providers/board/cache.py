"""The sole-writer read cache of a SQLite board.

A SQLite board is served by one bridge process, which holds an exclusive lock on
``<file>.lock`` for as long as it serves. Every write therefore passes through this
process, so a cache that ``commit`` refreshes after each transaction is exactly as
current as the file. PostgreSQL boards, shared by several instances, are never cached.
"""

from __future__ import annotations

import fcntl
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.providers.store import StoredTask

DEFAULT_CAPACITY = 20_000
Json = dict[str, Any]


class SoleWriterLock:
    """An exclusive ``flock`` on ``<database>.lock``; refused while another process holds it."""

    def __init__(self, database: str) -> None:
        self.database = database
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (blocking file I/O: call it from a worker thread)."""
        path = Path(self.database).expanduser()
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise ContractError(
                ErrorCode.FAILED_PRECONDITION,
                f"another process is serving the SQLite board {self.database}. Stop it "
                "first, or use PostgreSQL to run several bridge instances on one board",
            ) from exc
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class _Entry:
    """One cached task: its revision, and its model and wire form, each made on first use."""

    __slots__ = ("body", "json", "revision", "stored")

    def __init__(
        self, revision: int, stored: StoredTask | None, json: Json | None, body: str
    ) -> None:
        self.revision = revision
        self.stored = stored
        self.json = json
        self.body = body  # the stored text, kept only until the model is decoded from it


class ReadCache:
    """Recently read or written tasks and the change counter, refreshed by every commit.

    A task is held as its model (``get``) and its wire form (``get_json``), each made
    the first time it is asked for and then kept: a task written by this process arrives
    as a model, one read from the file as its stored JSON, and neither is converted into
    the other until a read needs it. The wire forms are shared between answers and never
    modified. ``decode`` turns a stored body into the model (``damaged`` when it fails).
    """

    def __init__(self, decode: Callable[[str], Task], capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._decode = decode
        self._tasks: OrderedDict[str, _Entry] = OrderedDict()
        self.change_seq: int | None = None

    def get(self, task_id: str) -> StoredTask | None:
        entry = self._entry(task_id)
        if entry is None:
            return None
        if entry.stored is None:
            entry.stored = StoredTask(self._decode(entry.body), entry.revision)
            entry.body = ""
        return entry.stored

    def get_json(self, task_id: str) -> Json | None:
        entry = self._entry(task_id)
        if entry is None:
            return None
        if entry.json is None:
            assert entry.stored is not None  # an entry holds at least one of the two
            entry.json = entry.stored.task.to_json()
        return entry.json

    def _entry(self, task_id: str) -> _Entry | None:
        entry = self._tasks.get(task_id)
        if entry is not None:
            self._tasks.move_to_end(task_id)
        return entry

    def put(self, stored: StoredTask) -> None:
        """Hold ``stored`` (a commit, or a model read)."""
        self._hold(stored.task.taskId, _Entry(stored.revision, stored, None, ""))

    def put_json(self, task_id: str, revision: int, body: str, json: Json) -> None:
        """Hold a task read as its stored ``body`` text, decoded to ``json``."""
        self._hold(task_id, _Entry(revision, None, json, body))

    def _hold(self, task_id: str, entry: _Entry) -> None:
        current = self._tasks.get(task_id)
        if current is not None and current.revision >= entry.revision:
            if current.revision == entry.revision:  # the same record: keep both forms
                current.stored = current.stored or entry.stored
                current.body = "" if current.stored is not None else current.body
                current.json = current.json if current.json is not None else entry.json
            return  # never replace a newer revision with an older read
        self._tasks[task_id] = entry
        self._tasks.move_to_end(task_id)
        while len(self._tasks) > self.capacity:
            self._tasks.popitem(last=False)

    def clear(self) -> None:
        self._tasks.clear()
        self.change_seq = None
