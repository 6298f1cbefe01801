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
from pathlib import Path

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.store import StoredTask

DEFAULT_CAPACITY = 20_000


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


class ReadCache:
    """Recently read or written tasks and the change counter, refreshed by every commit."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._tasks: OrderedDict[str, StoredTask] = OrderedDict()
        self.change_seq: int | None = None

    def get(self, task_id: str) -> StoredTask | None:
        stored = self._tasks.get(task_id)
        if stored is not None:
            self._tasks.move_to_end(task_id)
        return stored

    def put(self, stored: StoredTask) -> None:
        current = self._tasks.get(stored.task.taskId)
        if current is not None and current.revision > stored.revision:
            return  # never replace a newer revision with an older read
        self._tasks[stored.task.taskId] = stored
        self._tasks.move_to_end(stored.task.taskId)
        while len(self._tasks) > self.capacity:
            self._tasks.popitem(last=False)

    def clear(self) -> None:
        self._tasks.clear()
        self.change_seq = None
