"""The store port: what every endpoint's store implements, and what a mirror adds.

``TaskStore`` is what the command service serves: the board (``providers/board``), the
in-memory store (``providers/memory``), and the stores of the mirrored sources (hosted
trackers, tower-do boards) all implement it, and the service sees nothing else. A store
that cannot read raises ``ContractError(unavailable)``; it never answers an empty page
for a failure. ``commit`` is a compare-and-swap on the task's revision that, in one
transaction, writes the record, appends the history entry, records the envelope id's
result (when the command is idempotent by id) and advances ``changeSeq`` once.

``Mirror`` is the port plus what a store mirroring another source needs of its local
copy (reads and writes of several tasks at once): what a provider's ``build`` is handed.
``JsonReads`` is an optional fast path a store may offer; the endpoint's build says so
(``Built.json_reads``), nobody asks the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from cotal_tasks.core import (
    ContractError,
    ErrorCode,
    Seat,
    StaleMarker,
    Task,
    TaskStatus,
    TaskSummary,
)

# The request's deadline (``asyncio`` loop time, seconds) while a transport serves it: a
# store whose writes can stall (a hosted tracker) answers by then. ``None``: no deadline.
_DEADLINE: ContextVar[float | None] = ContextVar("cotal_tasks_deadline", default=None)


@contextmanager
def deadline_at(at: float | None) -> Iterator[None]:
    """Serve what runs inside by ``at`` (loop time), as the request's ``deadlineMs`` asks."""
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    """The deadline of the request being served, if its transport gave one."""
    return _DEADLINE.get()


@dataclass(frozen=True, slots=True)
class StoredTask:
    """A task as stored, with the revision a ``commit`` must name to replace it."""

    task: Task
    revision: int


@dataclass(frozen=True, slots=True)
class PageQuery:
    """A keyset page: tasks after ``after`` (a position from an earlier page), in order."""

    limit: int
    after: int | None = None
    statuses: frozenset[TaskStatus] | None = None
    bound_to: Seat | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """``tasks`` in position order; ``last`` is the position to continue after."""

    tasks: Sequence[TaskSummary]
    last: int | None
    more: bool


@dataclass(frozen=True, slots=True)
class RecordPage:
    """A ``Page`` of full records (brief and evidence included), for a reader that shows
    every field of every task on the page (the dashboard's board) in one read."""

    tasks: Sequence[Task]
    last: int | None
    more: bool


@dataclass(frozen=True, slots=True)
class SyncState:
    """How a store that mirrors another source (a hosted tracker, a tower-do board) last
    synced: the time of its last success and, while it fails, why (epoch ms)."""

    last_success_ms: int | None
    failing: str | None = None
    failing_since_ms: int | None = None
    # The source refuses the bridge for good (a wrong token, no access, no such
    # repository): retrying cannot help until the operator acts, so it is not ready.
    refused: bool = False
    # An endpoint over several sources (repositories, projects): each one's own state.
    sources: tuple[SourceState, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceState:
    """How one source of an endpoint over several last synced (``SyncState``'s terms)."""

    source: str
    last_success_ms: int | None
    failing: str | None = None
    failing_since_ms: int | None = None
    refused: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lastSync": self.last_success_ms,
            "failing": self.failing,
            "failingSince": self.failing_since_ms,
            "refused": self.refused,
        }


@dataclass(frozen=True, slots=True)
class JsonPage:
    """A ``Page`` (or ``RecordPage``) whose tasks are already in their wire form."""

    tasks: Sequence[dict[str, Any]]
    last: int | None
    more: bool


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """Record this write's result under ``key`` (an id-idempotent command's envelope id)."""

    key: str
    command: str
    args_digest: str
    # A result under this key recorded before this time (epoch ms) has expired and may
    # be replaced: an id is forgotten after the retention window.
    expired_before: int = 0


def result_reference(task_id: str, revision: int) -> str:
    """What an envelope id's result records: the task and the revision the write made, as
    JSON text (a replay reads the task; the record is never copied into the result)."""
    return orjson.dumps({"taskId": task_id, "revision": revision}).decode()


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A recorded result, kept for the retention window: ``result_reference``'s JSON text
    (or, recorded before it, the committed record itself)."""

    key: str
    command: str
    args_digest: str
    result: str


@dataclass(frozen=True, slots=True)
class Write:
    """One effective write. ``expected_revision`` is ``None`` to create a new task.

    A store may assign the created task's id itself (a hosted tracker numbers its
    issues); ``Committed.task`` is always the record as stored, and it is that record
    which the idempotency result holds.
    """

    task: Task
    expected_revision: int | None
    command: str
    actor: str
    note: str | None = None
    idempotency: IdempotencyKey | None = None


@dataclass(frozen=True, slots=True)
class Committed:
    task: Task
    revision: int
    change_seq: int


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    task_id: str
    at: int
    command: str
    actor: str
    status: TaskStatus
    note: str | None


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A keyset page of the append-only history, oldest first: the entries after ``after``
    (a position from an earlier page), of one task when ``task_id`` is given, else of every
    task of the endpoint."""

    limit: int
    after: int | None = None
    task_id: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """``entries`` in position order; ``last`` is the position to continue after (also
    when ``more`` is false: entries appended later come after it)."""

    entries: Sequence[HistoryEntry]
    last: int | None
    more: bool


class RevisionConflict(Exception):
    """The task changed (or came to exist) since it was read: re-read and re-apply."""


class IdempotencyKeyTaken(Exception):
    """Another write recorded this idempotency key first: recall its result."""


def task_not_found(task_id: str) -> ContractError:
    """The refusal of a read of a task the store does not hold (every store words it so)."""
    return ContractError(
        ErrorCode.NOT_FOUND,
        f"no task {task_id!r} on this board. Check the id (list-tasks shows the ids there are)",
    )


class TaskStore(Protocol):
    """Where tasks live. Every method raises ``ContractError(unavailable)`` on failure."""

    async def get(self, task_id: str) -> StoredTask:
        """The task, or ``ContractError(not-found)``."""
        ...

    async def page(self, query: PageQuery) -> Page:
        """A keyset page; cost independent of position."""
        ...

    async def page_records(self, query: PageQuery) -> RecordPage:
        """``page(query)`` with each task's full record, in the same one read."""
        ...

    async def commit(self, write: Write) -> Committed:
        """Apply ``write`` atomically, or raise ``RevisionConflict``/``IdempotencyKeyTaken``."""
        ...

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        """The result recorded under ``key`` at or after ``not_before`` (epoch ms)."""
        ...

    async def prune(self, before: int, history_before: int | None = None) -> int:
        """Forget idempotency results recorded before ``before``, and history entries
        written before ``history_before`` when given; return how many results."""
        ...

    async def change_seq(self) -> int:
        """The endpoint's change counter: durable, monotone, +1 per committed change."""
        ...

    async def freshness(self) -> StaleMarker | None:
        """``None`` when reads are current, else the marker a degraded read carries."""
        ...

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        """The task's append-only history, oldest first."""
        ...

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        """A keyset page of the history (one task's, or the endpoint's); cost independent
        of position."""
        ...

    async def sync_state(self) -> SyncState | None:
        """How the store last synced from its source; ``None`` for a store that is its
        own source of truth (the board)."""
        ...

    async def close(self) -> None: ...


class JsonReads(Protocol):
    """Optional fast reads: the stored wire form, without rebuilding the models.

    A store implements these when it keeps records in their wire form and only ever
    wrote validated records (the board). Its build declares them (``Built.json_reads``);
    the command service then uses them for ``get-task`` and the pages, and the
    dashboard's board feed for its pages of records; the answer is the same.
    """

    async def get_json(self, task_id: str) -> dict[str, Any]:
        """``get(task_id).task.to_json()``, or ``ContractError(not-found)``."""
        ...

    def held_json(self, task_id: str) -> dict[str, Any] | None:
        """What ``get_json(task_id)`` answers when the store holds it in memory, without
        waiting; ``None`` when it does not (read it with ``get_json``). The same dict is
        handed out until the task changes, and nobody modifies it."""
        ...

    async def page_json(self, query: PageQuery) -> JsonPage:
        """``page(query)`` with each task as ``to_json()``."""
        ...

    async def page_records_json(self, query: PageQuery) -> JsonPage:
        """``page_records(query)`` with each record as ``to_json()``."""
        ...


class Mirror(TaskStore, Protocol):
    """A store a provider keeps its source's tasks in (the board store, the in-memory
    store): the port, and what a mirror needs to copy a page of its source at once."""

    @property
    def label(self) -> str:
        """Where the store lives (a URL without its password), for logs and health."""
        ...

    async def get_many(self, task_ids: Sequence[str]) -> dict[str, StoredTask]:
        """The tasks of ``task_ids`` that exist, in one read."""
        ...

    async def commit_many(self, writes: Sequence[Write]) -> list[Committed]:
        """Apply every write in one transaction, or none (``RevisionConflict``,
        ``IdempotencyKeyTaken``); each advances ``changeSeq`` by one."""
        ...
