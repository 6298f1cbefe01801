"""A tower-do board as a ``TaskStore``: reads from a local mirror (a board store that also
keeps the idempotency results and ``changeSeq``), writes appended to the board file under
tower-do's rules first and into the mirror only once they landed.

``refresh`` folds what the file gained and mirrors it; the follower runs it whenever the
file watcher (or, failing that, the poll) sees the file change. Writes and refreshes
take turns on one lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from cotal_tasks.core import ContractError, ErrorCode, Outcome, StaleMarker, Task
from cotal_tasks.providers.hosted.mapping import same_record
from cotal_tasks.providers.hosted.store import MirroredReads, SyncHealth
from cotal_tasks.providers.provider import SeatUids, no_uids
from cotal_tasks.providers.store import (
    Committed,
    IdempotencyKeyTaken,
    Mirror,
    RevisionConflict,
    StoredTask,
    Write,
)
from cotal_tasks.providers.tower_do import mapping, rules
from cotal_tasks.providers.tower_do.boardfile import (
    BoardFile,
    BoardMoved,
    LeaseTimeout,
    LockNotADirectory,
    live_owners,
)
from cotal_tasks.providers.tower_do.config import TowerDoConfig
from cotal_tasks.providers.tower_do.fold import TOWER, Fold, Row
from cotal_tasks.providers.tower_do.worker import FileWorker, StillBusy

log = logging.getLogger(__name__)
ChangeHook = Callable[[int], Awaitable[None]]
_ATTEMPTS = 3
_REFUSED = {
    "budget": ErrorCode.RESOURCE_EXHAUSTED,
    "dependency": ErrorCode.FAILED_PRECONDITION,
    "row": ErrorCode.BAD_REQUEST,
    "removed": ErrorCode.CONFLICT,
}


class RowMoved(Exception):
    """A peer changed the task between the caller's read and the append."""


@dataclass(frozen=True, slots=True)
class Landed:
    row: Row | None  # None: the key was removed
    fold: Fold


class TowerDoStore(MirroredReads):
    """The ``TaskStore`` of one tower-do endpoint."""

    def __init__(
        self,
        mirror: Mirror,
        config: TowerDoConfig,
        *,
        space: str,
        clock: Callable[[], int],
        seat_uids: SeatUids = no_uids,
    ) -> None:
        self.mirror = mirror
        self.config = config
        self.board = BoardFile(config.board_file())
        self.space = space
        self.clock = clock
        self.seat_uids = seat_uids
        self.health: SyncHealth = SyncHealth()
        self.lock = asyncio.Lock()
        self.files = FileWorker(str(self.board.path))  # the board's file work, off the loop
        self._on_change: list[ChangeHook] = []
        self._live_keys: set[str] | None = None  # mirror keys not dropped, once loaded
        self._mirrored: tuple[int, int] | None = None  # (rebuilds, offset) last mirrored

    # -- reads: the mirror (``MirroredReads``) -----------------------------------------------
    async def get(self, task_id: str) -> StoredTask:
        """The mirrored task; a key the mirror does not hold is looked up on the board
        first (an agent may have just written it, ahead of the follower), so ``not-found``
        means the board does not hold it either. An unreadable board leaves the answer
        to the mirror."""
        try:
            return await self.mirror.get(task_id)
        except ContractError as exc:
            if exc.code is not ErrorCode.NOT_FOUND:
                raise
            with contextlib.suppress(ContractError):
                await self.refresh()
        return await self.mirror.get(task_id)

    async def freshness(self) -> StaleMarker | None:
        if self.health.failing is not None:
            return StaleMarker(
                staleAsOf=self.health.last_success_ms or 0,
                reason=f"the tower-do board cannot be read: {self.health.failing}"[:512],
            )
        if self.health.last_success_ms is None:
            return StaleMarker(staleAsOf=0, reason="the tower-do board has not been read yet")
        return None

    # -- the board into the mirror ----------------------------------------------------------
    async def refresh(self) -> int:
        """Fold what the board file gained and mirror it; how many records changed."""
        async with self.lock:
            await self._read_board("the endpoint reads it again at its next poll")
            count = await self._mirror_fold() if self._behind() else 0
            self.health.succeeded(self.clock())
        if count:
            seq = await self.mirror.change_seq()
            for hook in self._on_change:
                try:
                    await hook(seq)
                except Exception:
                    log.exception("change hook failed after a tower-do refresh")
        return count

    def _behind(self) -> bool:
        """Whether the fold moved past what the mirror holds (a write folds peers too)."""
        return self._mirrored != (self.board.replaced, self.board.offset)

    async def _known_keys(self) -> set[str]:
        if self._live_keys is None:
            self._live_keys = {t.taskId async for t in self.mirrored() if t.status != "dropped"}
        return self._live_keys

    async def _mirror_fold(self) -> int:
        fold = self.board.fold
        live = await self._known_keys()
        gone = sorted(live - fold.tasks.keys())
        held = await self.mirror.get_many([*fold.tasks, *gone])
        now = self.clock()
        writes: list[Write] = []
        for key, row in fold.tasks.items():
            stored = held.get(key)
            record = await self._project(row, fold, stored.task if stored else None, now)
            if stored is None or not same_record(record, stored.task):
                writes.append(
                    Write(record, stored.revision if stored else None, "sync", "tower-do-sync")
                )
        for key in gone:
            stored = held.get(key)
            if stored is not None and stored.task.status != "dropped":
                writes.append(
                    Write(
                        mapping.dropped(stored.task, now), stored.revision, "sync", "tower-do-sync"
                    )
                )
        committed = await self.mirror.commit_many(writes)
        self._live_keys = set(fold.tasks)
        self._mirrored = (self.board.replaced, self.board.offset)
        return len(committed)

    async def _project(self, row: Row, fold: Fold, existing: Task | None, now: int) -> Task:
        uids: dict[tuple[str, str], str | None] = {}
        principal = self.config.seats.get(row.owner) if row.owner is not None else None
        if principal is not None:
            owner, actor = principal.split(".", 1)
            uids[(owner, actor)] = await self.seat_uids(owner, actor)
        return mapping.project(
            row,
            fold.tasks,
            notes=fold.notes.get(row.key),
            space=self.space,
            seats=self.config.seats,
            existing=existing,
            uid_of=lambda owner, actor: uids.get((owner, actor)),
            now=now,
        )

    # -- writes: the board first, then the mirror ------------------------------------------
    async def commit(self, write: Write) -> Committed:
        async with self.lock:
            if write.idempotency is not None and await self.mirror.recall(
                write.idempotency.key, write.idempotency.expired_before
            ):
                raise IdempotencyKeyTaken(write.idempotency.key)
            # Decide on the board as it is now: what agents appended since the last refresh
            # is mirrored first, and a task it changed is re-read by the caller.
            await self._catch_up()
            old: Task | None = None
            if write.expected_revision is not None:
                stored = await self.mirror.get(write.task.taskId)
                if stored.revision != write.expected_revision:
                    raise RevisionConflict(write.task.taskId)
                old = stored.task
            expected = self.board.fold.tasks.get(write.task.taskId) if old is not None else None
            try:
                landed, key = await self._append(write, old, expected)
            except RowMoved:
                await self._catch_up()
                raise RevisionConflict(write.task.taskId) from None
            final = self._final(write, key, landed)
            committed = await self.mirror.commit(
                Write(
                    final,
                    write.expected_revision,
                    write.command,
                    write.actor,
                    write.note,
                    write.idempotency,
                )
            )
            if self._live_keys is not None:
                (self._live_keys.add if final.status != "dropped" else self._live_keys.discard)(
                    final.taskId
                )
            if self._behind():  # the write folded what peers appended: mirror that too
                await self._mirror_fold()
            return committed

    async def _catch_up(self) -> None:
        await self._read_board("then retry", outcome="not-executed")
        if self._behind():
            await self._mirror_fold()

    async def _read_board(self, then: str, outcome: Outcome | None = None) -> None:
        """Fold what the board gained. A board that cannot be read (a link, a FIFO, no
        permission, a hung read) leaves the endpoint stale and not ready until a read
        succeeds again; the error names the file and what to do."""
        try:
            await self.files.run(self.board.refresh)
        except (OSError, StillBusy) as exc:
            refusal = unreadable(self.board.path, exc, then, outcome)
            self.health.failed(f"{self.board.path}: {_why(exc)}", self.clock(), refused=True)
            raise refusal from exc

    def _final(self, write: Write, key: str, landed: Landed) -> Task:
        data = write.task.model_dump()
        data["taskId"] = key
        data["statusSource"] = landed.row.status if landed.row is not None else mapping.REMOVED
        return Task.model_validate(data)

    def _caller(self, write: Write) -> str:
        """Who the write is, to tower-do: the seat's identity, tower for the operator
        commands, else the endpoint's own identity."""
        if write.command in ("bind-task", "administer-task"):
            return TOWER
        principal = write.actor.split("/", 1)[0]
        for identity, mapped in self.config.seats.items():
            if mapped == principal:
                return identity
        return self.config.identity

    async def _append(
        self, write: Write, old: Task | None, expected: Row | None
    ) -> tuple[Landed, str]:
        caller = self._caller(write)
        now = self.clock()
        try:
            live = await self.files.run(
                lambda: live_owners(self.board.path, now, rules.LIVE_WINDOW_MS)
            )
            return await self.files.run(
                lambda: self._decide_and_append(write, old, expected, caller, live)
            )
        except rules.WriteRefused as exc:
            code = _REFUSED.get(exc.rule)
            if code is None:  # the ownership guard
                code = (
                    ErrorCode.CONFLICT
                    if write.command == "claim-task"
                    else (ErrorCode.PERMISSION_DENIED)
                )
            raise ContractError(code, exc.message, outcome="not-executed") from exc
        except LockNotADirectory as exc:
            log.warning("tower-do write refused: %s", exc)
            raise ContractError(ErrorCode.UNAVAILABLE, str(exc), outcome="not-executed") from exc
        except (OSError, LeaseTimeout, StillBusy) as exc:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                f"the tower-do board {self.board.path} could not be written ({exc}). Retry",
                outcome="not-executed",
            ) from exc

    def _decide_and_append(
        self,
        write: Write,
        old: Task | None,
        expected: Row | None,
        caller: str,
        live: set[str] | None,
    ) -> tuple[Landed, str]:
        for _ in range(_ATTEMPTS):
            with self.board.lease():
                self.board.refresh()
                fold = self.board.fold
                if old is not None and fold.tasks.get(write.task.taskId) != expected:
                    raise RowMoved(write.task.taskId)  # decided on a row no longer current
                now = self.clock()
                key = (
                    write.task.taskId
                    if old is not None
                    else mapping.new_key(write.task.title, fold.tasks)
                )
                task = (
                    write.task if old is not None else write.task.model_copy(update={"taskId": key})
                )
                row = mapping.row_for(
                    old, task, fold.tasks.get(key), seats=self.config.seats, note=write.note
                )
                stale = rules.stale_claims(fold, now, live)
                events: list[dict[str, object]] = []
                if old is not None and row is not None:
                    rules.check_not_removed(fold, key)
                if row is None:
                    if rules.plan_remove(fold, key, caller, stale):
                        events.append(rules.remove_event(key, caller, now))
                else:
                    events += rules.upsert_events(fold, row, caller, stale, now)
                if old is None and task.status == "dropped":
                    seed = mapping.row_for(
                        None,
                        task.model_copy(update={"status": "open"}),
                        None,
                        seats=self.config.seats,
                        note=None,
                    )
                    assert seed is not None
                    planned = rules.plan_upsert(fold, seed, caller, stale, now)
                    assert planned is not None
                    events = [
                        rules.upsert_event(planned, caller, now),
                        rules.remove_event(key, caller, now),
                    ]
                events += self._notes(fold, key, caller, now, write, old)
                try:
                    if events:
                        self.board.append(events)
                except BoardMoved:
                    continue  # a peer appended since the fold: fold again, decide again
                self.board.refresh()
                return Landed(self.board.fold.tasks.get(key), self.board.fold), key
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"the tower-do board kept changing under {_ATTEMPTS} attempts to write. Retry",
            outcome="not-executed",
        )

    def _notes(
        self, fold: Fold, key: str, caller: str, now: int, write: Write, old: Task | None
    ) -> list[dict[str, object]]:
        """The note and any new evidence, as a message threaded under the task."""
        added = [e for e in write.task.evidence if old is None or e not in old.evidence]
        body = mapping.note_body(write.note, added)
        if body is None:
            return []
        subject = f"{write.command} on {key}"
        message_id = f"m-{secrets.token_hex(6)}"
        return [rules.note_event(fold, key, caller, now, message_id, subject, body)]


def _why(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def unreadable(
    path: Path, exc: Exception, then: str, outcome: Outcome | None = None
) -> ContractError:
    """The refusal of a board that cannot be read (a link, a FIFO, no permission, a hung
    read): the file, why, and what to do."""
    remedy = (
        f"Check the file's permissions, then {then}"
        if isinstance(exc, PermissionError)
        else then[:1].upper() + then[1:]
    )
    return ContractError(
        ErrorCode.UNAVAILABLE,
        f"the tower-do board {path} cannot be read ({_why(exc)}). {remedy}",
        outcome=outcome,
    )
