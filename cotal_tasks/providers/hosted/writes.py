"""Write-back: the tracker first, then the mirror, once, and in time.

- **One write per task at a time, and only per task**: a process-local lock per task
  (a stalled write to one issue never holds up a write to another) and, across the
  instances sharing the mirror, the lease ``write:<task>``.
- **In time**: the request's deadline (``current_deadline``) bounds the answer. A write
  still waiting for its turn is given up (``not-executed``); one already talking to the
  tracker goes on in the background and the caller hears ``unknown``: a retry with the
  same envelope id learns the result.
- **Never twice**: the write is recorded in the ledger under the caller triple and
  envelope id before the tracker call and carries its mark (a hidden comment) into the
  tracker. A retry that finds it pending (a crash, a timeout, a mirror failure after the
  tracker took it) reconciles against the tracker and applies only what is missing.
- **Honest**: an answer's ``outcome`` is what the tracker applied: ``executed`` when any
  part took effect (and the mirror shows it at once), ``unknown`` when no answer came,
  ``not-executed`` only when nothing did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from cotal_tasks.core import MAX_EVIDENCE, ContractError, ErrorCode, Task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.conflict import closed_meanwhile, contested, first_come
from cotal_tasks.providers.hosted.credentials import seat_write
from cotal_tasks.providers.hosted.echo import content_of
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.ledger import PENDING, Intent, Leases, Ledger, marker_of
from cotal_tasks.providers.hosted.rereads import ErrorOf, Project, Rereads
from cotal_tasks.providers.hosted.scope import left_scope, with_needs
from cotal_tasks.providers.hosted.tracker import (
    TrackedIssue,
    Tracker,
    TrackerChange,
    TrackerRefused,
)
from cotal_tasks.providers.hosted.writeback import (
    WritePlan,
    plan_change,
    plan_new,
    with_marker,
)
from cotal_tasks.providers.store import (
    Committed,
    IdempotencyKeyTaken,
    RevisionConflict,
    Write,
    current_deadline,
)

log = logging.getLogger(__name__)

LEASE_MS = 6_000  # a write's hold on its task, renewed every third while it runs
HOLD_MS = 120_000  # how long a pending write keeps the sync off its task
_MIRROR_ATTEMPTS = 8
_TAKE_EVERY_S = 0.05


@dataclass
class _Job:
    touched: bool = False  # the tracker may have been written


class Writes:
    """The write path of one hosted endpoint."""

    def __init__(
        self,
        mirror: BoardStore,
        tracker: Tracker,
        checkpoints: Checkpoints,
        *,
        config: HostedConfig,
        plan: WritePlan,
        clock: Callable[[], int],
        project: Project,
        error: ErrorOf,
        instance: str | None = None,
        lease_ms: int = LEASE_MS,
    ) -> None:
        self.mirror = mirror
        self.tracker = tracker
        self.ledger = Ledger(checkpoints.engine)
        self.leases = Leases(checkpoints.engine)
        self.config = config
        self.plan = plan
        self.clock = clock
        self.project = project
        self.error = error
        self.reads = Rereads(tracker, project, error)
        self.instance = instance or uuid.uuid4().hex[:12]
        self.lease_ms = lease_ms
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._background: set[asyncio.Future[Committed]] = set()

    async def commit(self, write: Write) -> Committed:
        job = _Job()
        work = asyncio.ensure_future(self._serialized(write, job))
        deadline = current_deadline()
        budget = None
        if deadline is not None:
            budget = deadline - asyncio.get_running_loop().time()
            budget = max(0.0, budget - min(0.5, budget / 10))
        try:
            return await asyncio.wait_for(asyncio.shield(work), budget)
        except TimeoutError:
            if not job.touched:
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
                what = (
                    "an earlier attempt of this create"
                    if write.expected_revision is None
                    else f"an earlier write to {write.task.taskId}"
                )
                raise ContractError(
                    ErrorCode.DEADLINE_EXCEEDED,
                    f"{what} held its turn past this request's deadline. Retry (the same "
                    "envelope id is safe) or give a longer deadlineMs",
                    outcome="not-executed",
                ) from None
            self._keep(work)
            raise ContractError(
                ErrorCode.DEADLINE_EXCEEDED,
                f"{self.tracker.name} did not answer within the request's deadline. The "
                "write goes on: retry with the same envelope id to learn its result",
                outcome="unknown",
            ) from None
        except asyncio.CancelledError:
            if job.touched:
                self._keep(work)
            else:
                work.cancel()
            raise

    def _keep(self, work: asyncio.Future[Committed]) -> None:
        self._background.add(work)

        def finished(done: asyncio.Future[Committed]) -> None:
            self._background.discard(done)
            if not done.cancelled() and done.exception() is not None:
                log.warning("a write that outlived its deadline failed: %s", done.exception())

        work.add_done_callback(finished)

    async def drain(self) -> None:
        """Let writes that outlived their request finish (on shutdown)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # -- turns ---------------------------------------------------------------------------
    async def _serialized(self, write: Write, job: _Job) -> Committed:
        # A seat's write: its requests keep the reserve of the token's rate limits, which
        # the sync leaves them (``credentials``). This runs as a task of its own.
        with seat_write():
            return await self._locked(write, job)

    async def _locked(self, write: Write, job: _Job) -> Committed:
        task_id = None if write.expected_revision is None else write.task.taskId
        key = write.idempotency.key if write.idempotency else f"once:{uuid.uuid4().hex}"
        name = f"write:{task_id or key}"
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                holder = f"{self.instance}:{key}"[:128]
                await self._take(name, holder)
                renew = asyncio.create_task(self._renew(name, holder))
                try:
                    return await self._write(write, key, task_id, job)
                finally:
                    renew.cancel()
                    with contextlib.suppress(ContractError):
                        await self.leases.release(name, holder)
        finally:
            lock, users = self._locks[name]
            if users <= 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)

    async def _take(self, name: str, holder: str) -> None:
        # Another instance may be writing this task: poll its lease (the request's
        # deadline bounds the wait; an event cannot cross processes).
        while not await self.leases.acquire(name, holder, self.clock(), self.lease_ms):  # noqa: ASYNC110
            await asyncio.sleep(_TAKE_EVERY_S)

    async def _renew(self, name: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            with contextlib.suppress(ContractError):
                await self.leases.acquire(name, holder, self.clock(), self.lease_ms)

    async def _write(self, write: Write, key: str, task_id: str | None, job: _Job) -> Committed:
        earlier: Intent | None = None
        if write.idempotency is not None:
            if await self.mirror.recall(write.idempotency.key, write.idempotency.expired_before):
                raise IdempotencyKeyTaken(write.idempotency.key)
            earlier = await self.ledger.get(key)
        resume = earlier if earlier is not None and earlier.state == PENDING else None
        if task_id is None:
            final = await self._create(write.task, key, resume, job)
        else:
            final = await self._update(write, key, task_id, resume, job)
        committed = await self._mirror(final, write)
        with contextlib.suppress(ContractError):  # the echo mark; the pending row stays
            await self.ledger.done(key, final.taskId, committed.change_seq)
        return committed

    # -- the tracker ---------------------------------------------------------------------
    async def _create(self, task: Task, key: str, resume: Intent | None, job: _Job) -> Task:
        issue, follow = plan_new(task, self.plan)
        issue = with_needs(issue, self.config.scope)
        marker = marker_of(key)
        await self.ledger.pending(
            key, None, None, self.instance, self.clock(), HOLD_MS, content_of(task)
        )
        created: TrackedIssue | None = None
        if resume is not None:
            created = await self.reads.earlier_create(resume, marker)
        if created is None:
            job.touched = True
            try:
                created = await self.tracker.create(
                    replace(issue, body=with_marker(issue.body, marker))
                )
            except TrackerHttpError as exc:
                raise await self._refused(exc, key, None) from exc
        else:
            follow = await self.reads.remaining(created.number, follow, marker)
        await self.ledger.located(key, created.task_id, created.number)
        if follow:
            job.touched = True
            try:
                await self.tracker.apply(created.number, self._marked(follow, marker))
            except TrackerRefused as exc:
                await self._show(created.number)
                raise self.error(exc.error, "executed") from exc
        tracked = await self.reads.reread(created.number) or created
        projected = await self.project(tracked, None)
        evidence = {(e.kind, e.ref): e for e in (*projected.evidence, *task.evidence)}
        return Task.model_validate(
            {
                **projected.model_dump(),
                "evidence": [e.model_dump() for e in evidence.values()][-MAX_EVIDENCE:],
            }
        )

    async def _update(
        self, write: Write, key: str, task_id: str, resume: Intent | None, job: _Job
    ) -> Task:
        stored = await self.mirror.get(task_id)
        if stored.revision != write.expected_revision:
            raise RevisionConflict(task_id)
        if left_scope(stored.task.statusSource):
            raise ContractError(
                ErrorCode.FAILED_PRECONDITION,
                f"{task_id} left this endpoint's scope on {self.tracker.name} "
                f"({stored.task.statusSource}), so the bridge writes nothing to its issue. "
                "A person puts it back in the scope on the tracker (the task comes back "
                "with its history), or leaves it out",
                outcome="not-executed",
            )
        number = self.tracker.number_of(task_id)
        if number is None:
            raise ContractError(
                ErrorCode.FAILED_PRECONDITION,
                f"{task_id!r} is not a {self.tracker.name} issue of this endpoint. Check the "
                "task id (list-tasks shows the ids there are)",
                outcome="not-executed",
            )
        change = plan_change(
            stored.task, write.task, plan=self.plan, seats=self.config.seats, note=write.note
        )
        if not change:
            return write.task
        if resume is None:
            await self._first_come(stored.revision, stored.task, write.task, number)
        marker = marker_of(key)
        await self.ledger.pending(
            key, task_id, number, self.instance, self.clock(), HOLD_MS, content_of(write.task)
        )
        if resume is not None:
            change = await self.reads.remaining(number, change, marker)
        if change:
            job.touched = True
            try:
                await self.tracker.apply(number, self._marked(change, marker))
            except TrackerRefused as exc:
                if not exc.applied:
                    raise await self._refused(exc.error, key, number) from exc
                # Part took effect. A close that landed meanwhile is why the rest was
                # refused (Jira: no transition from Done): taken back as on any tracker.
                tracked = await self.reads.reread(number)
                after = None if tracked is None else await self.project(tracked, write.task)
                if after and (refusal := closed_meanwhile(stored.task, write.task, after)):
                    await self._take_back(number, change, key)
                    raise refusal from exc
                await self._show(number)
                raise self.error(exc.error, "executed") from exc
        tracked = await self.reads.reread(number)
        if tracked is None:
            return write.task
        # What the tracker holds after the write, as the mapping reads it: a person's
        # edit that landed meanwhile (a title, a close) is in the record and the reply.
        after = await self.project(tracked, write.task)
        if refusal := closed_meanwhile(stored.task, write.task, after):
            await self._take_back(number, change, key)
            raise refusal
        return after

    async def _first_come(self, revision: int, read: Task, new: Task, number: int) -> None:
        """The conflict rule (``hosted.conflict``): a write that changes a field a person
        changed on the tracker since the mirror read it is refused with ``conflict``,
        nothing written, and the mirror shows what the person did."""
        if not contested(read, new):
            return
        current = await self.reads.current(number, read)
        if current is None:
            return
        if refusal := first_come(read, new, current, self.tracker.name):
            with contextlib.suppress(ContractError, RevisionConflict):
                actor = f"{self.tracker.name}-write-back"
                await self.mirror.commit(Write(current, revision, "sync", actor))
            raise refusal

    async def _take_back(self, number: int, change: TrackerChange, key: str) -> None:
        """A person closed the issue while ``change`` was written: remove what the write
        added (its assignee, its labels), never what the person did, and mirror the
        issue as it is then. A retry of the write starts over and hears ``conflict``."""
        undo = TrackerChange(unassign=change.assign, remove_labels=change.add_labels)
        if undo:
            try:
                await self.tracker.apply(number, undo)
            except TrackerRefused as exc:
                log.warning("taking back a write to issue %s failed: %s", number, exc)
        with contextlib.suppress(ContractError):
            await self.ledger.forget(key)
        await self._show(number)

    def _marked(self, change: TrackerChange, marker: str) -> TrackerChange:
        if not change.comment:
            return change
        return replace(change, comment=with_marker(change.comment, marker))

    async def _refused(self, exc: Exception, key: str, number: int | None) -> ContractError:
        """A write nothing of which took effect, unless no answer came (then it may have)."""
        if isinstance(exc, TrackerHttpError) and exc.status is None:
            return self.error(exc, "unknown")  # the pending row stays: a retry reconciles
        with contextlib.suppress(ContractError):
            await self.ledger.forget(key)
        return self.error(exc, "not-executed")

    async def _show(self, number: int) -> None:
        """Part of a write took effect: mirror the issue as the tracker now holds it."""
        tracked = await self.reads.reread(number)
        if tracked is None:
            return
        try:
            held = await self.mirror.get(tracked.task_id)
            existing: Task | None = held.task
        except ContractError:
            existing = None
        record = await self.project(tracked, existing)
        with contextlib.suppress(ContractError):
            await self._mirror(
                record, Write(record, None, "sync", f"{self.tracker.name}-write-back")
            )

    # -- the mirror ----------------------------------------------------------------------
    async def _mirror(self, final: Task, write: Write) -> Committed:
        """Commit what the tracker took. It is there already: a conflict with the sync is
        settled in the mirror, never by writing the tracker again. The sync's newer
        revision may hold a person's edit read after this write's own read, so the
        record committed over it is the tracker's as read again after the conflict
        (newer than anything the sync read before it committed)."""
        expected = write.expected_revision
        number = self.tracker.number_of(final.taskId)
        for attempt in range(_MIRROR_ATTEMPTS):
            if attempt and number is not None:
                final = await self.reads.read_over(number, final)
            try:
                return await self.mirror.commit(
                    Write(
                        final,
                        expected,
                        write.command,
                        write.actor,
                        write.note,
                        write.idempotency,
                    )
                )
            except RevisionConflict:
                try:
                    expected = (await self.mirror.get(final.taskId)).revision
                except ContractError as exc:
                    if exc.code is not ErrorCode.NOT_FOUND:
                        raise exc.with_outcome("executed") from None
                    expected = None
            except ContractError as exc:
                raise exc.with_outcome("executed") from None
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"{self.tracker.name} took the write but the mirror kept changing under it. "
            "Retry with the same envelope id (the write is not repeated)",
            outcome="executed",
        )
