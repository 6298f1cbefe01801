"""A store in memory: the store port with nothing behind it but a dict.

``MemoryStore`` keeps the board's contract (the shared store behaviour suite runs it beside
SQLite and PostgreSQL): a compare-and-swap on each task's revision, a history entry and
the idempotency result in the same write, ``changeSeq`` advancing once per committed
change, keyset pages in creation order, and ``commit_many`` all or nothing. It keeps
nothing past the process, so it is for tests and for library users who want the command
service without a database (as ``httpx`` ships a mock transport); an endpoint of the
bridge keeps its board in SQLite or PostgreSQL.

Closing it keeps its data: ``reopen()`` is the same store open again, as a board file
reopened would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cotal_tasks.core import ContractError, ErrorCode, StaleMarker, TaskSummary
from cotal_tasks.providers.store import (
    Committed,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    IdempotencyKeyTaken,
    IdempotencyRecord,
    Page,
    PageQuery,
    RecordPage,
    RevisionConflict,
    StoredTask,
    SyncState,
    Write,
    result_reference,
    task_not_found,
)


@dataclass(slots=True)
class _Row:
    position: int
    stored: StoredTask
    summary: TaskSummary


@dataclass(slots=True)
class _Recorded:
    record: IdempotencyRecord
    created_at: int


@dataclass
class _Data:
    """What a memory store holds; shared by a store and the one reopened after it."""

    rows: dict[str, _Row] = field(default_factory=dict)
    history: list[HistoryEntry] = field(default_factory=list)
    history_dropped: int = 0  # entries pruned from the front: positions stay stable
    results: dict[str, _Recorded] = field(default_factory=dict)
    change_seq: int = 0
    positions: int = 0


class MemoryStore:
    """A ``Mirror`` (the ``TaskStore`` port, ``get_many`` and ``commit_many``) in memory."""

    def __init__(self, label: str = "memory") -> None:
        self._data = _Data()
        self._label = label
        self._closed = False

    @property
    def label(self) -> str:
        return self._label

    def reopen(self) -> MemoryStore:
        """This store's data, open again (after ``close``, as a reopened board file)."""
        again = MemoryStore(self._label)
        again._data = self._data
        return again

    def _open(self) -> _Data:
        if self._closed:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                f"the store {self._label!r} is closed. Open it again (reopen) before using it",
            )
        return self._data

    async def get(self, task_id: str) -> StoredTask:
        row = self._open().rows.get(task_id)
        if row is None:
            raise task_not_found(task_id)
        return row.stored

    async def get_many(self, task_ids: Sequence[str]) -> dict[str, StoredTask]:
        rows = self._open().rows
        return {task_id: rows[task_id].stored for task_id in task_ids if task_id in rows}

    def _selected(self, query: PageQuery) -> tuple[list[_Row], bool]:
        seat = query.bound_to
        chosen: list[_Row] = []
        for row in sorted(self._open().rows.values(), key=lambda row: row.position):
            task = row.stored.task
            if query.after is not None and row.position <= query.after:
                continue
            if query.statuses is not None and task.status not in query.statuses:
                continue
            if seat is not None and (
                task.binding is None
                or (task.binding.owner, task.binding.actor, task.binding.lifecycleUid)
                != (seat.owner, seat.actor, seat.lifecycleUid)
            ):
                continue
            chosen.append(row)
            if len(chosen) > query.limit:
                break
        return chosen[: query.limit], len(chosen) > query.limit

    async def page(self, query: PageQuery) -> Page:
        rows, more = self._selected(query)
        return Page([row.summary for row in rows], _last(rows, query), more)

    async def page_records(self, query: PageQuery) -> RecordPage:
        rows, more = self._selected(query)
        return RecordPage([row.stored.task for row in rows], _last(rows, query), more)

    async def commit(self, write: Write) -> Committed:
        return (await self.commit_many([write]))[0]

    async def commit_many(self, writes: Sequence[Write]) -> list[Committed]:
        """Every write, or none: a refused one (``RevisionConflict``,
        ``IdempotencyKeyTaken``) leaves the store as it was."""
        data = self._open()
        rows = dict(data.rows)
        results = dict(data.results)
        positions, seq = data.positions, data.change_seq
        committed: list[Committed] = []
        entries: list[HistoryEntry] = []
        for write in writes:
            task, key = write.task, write.idempotency
            if key is not None:
                held = results.get(key.key)
                if held is not None and held.created_at >= key.expired_before:
                    raise IdempotencyKeyTaken(key.key)
                made = 1 if write.expected_revision is None else write.expected_revision + 1
                text = result_reference(task.taskId, made)
                record = IdempotencyRecord(key.key, key.command, key.args_digest, text)
                results[key.key] = _Recorded(record, task.updatedAt)
            current = rows.get(task.taskId)
            if write.expected_revision is None:
                if current is not None:
                    raise RevisionConflict(task.taskId)
                positions += 1
                position, revision = positions, 1
            else:
                if current is None or current.stored.revision != write.expected_revision:
                    raise RevisionConflict(task.taskId)
                position, revision = current.position, write.expected_revision + 1
            rows[task.taskId] = _Row(position, StoredTask(task, revision), task.summary())
            entries.append(
                HistoryEntry(
                    task.taskId, task.updatedAt, write.command, write.actor, task.status, write.note
                )
            )
            seq += 1
            committed.append(Committed(task, revision, seq))
        data.rows, data.results = rows, results
        data.positions, data.change_seq = positions, seq
        data.history.extend(entries)
        return committed

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        held = self._open().results.get(key)
        return held.record if held is not None and held.created_at >= not_before else None

    async def prune(self, before: int, history_before: int | None = None) -> int:
        data = self._open()
        if history_before is not None:  # the oldest entries, a prefix: positions hold
            dropped = 0
            while dropped < len(data.history) and data.history[dropped].at < history_before:
                dropped += 1
            data.history = data.history[dropped:]
            data.history_dropped += dropped
        expired = [key for key, held in data.results.items() if held.created_at < before]
        for key in expired:
            del data.results[key]
        return len(expired)

    async def change_seq(self) -> int:
        return self._open().change_seq

    async def freshness(self) -> StaleMarker | None:
        return None  # its own source of truth

    async def sync_state(self) -> SyncState | None:
        return None

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        return (await self.history_page(HistoryQuery(limit=limit, task_id=task_id))).entries

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        # An entry's position is its place in the append-only list, counted from 1
        # (pruned entries included, so a cursor stays valid across a prune).
        data = self._open()
        after = max(query.after or 0, data.history_dropped)
        found = [
            (position, entry)
            for position, entry in enumerate(
                data.history[after - data.history_dropped :], start=after + 1
            )
            if query.task_id is None or entry.task_id == query.task_id
        ]
        page = found[: query.limit]
        last = page[-1][0] if page else query.after
        return HistoryPage([entry for _, entry in page], last, len(found) > query.limit)

    async def close(self) -> None:
        self._closed = True


def _last(rows: Sequence[_Row], query: PageQuery) -> int | None:
    return rows[-1].position if rows else query.after
