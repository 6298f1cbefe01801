"""A hosted tracker as a ``TaskStore``: reads from the local mirror, writes through the
tracker first and into the mirror only once the tracker took them.

The mirror is a board store, shared by every instance of the endpoint on PostgreSQL.
Writes go through ``writes`` (one at a time per task, recorded in the write ledger with
what each sent); the sync never applies a snapshot of a task the ledger says was
written after the tracker was read (or is being written): it defers the issue, to be
read again once the write settled, and reads a page again when a write lands while it
commits. Reads never call the tracker; they
carry a ``stale`` marker when the last successful sync is older than the bound or the
tracker is failing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cotal_tasks.core import (
    NEEDS_BINDING,
    STATUSES,
    TERMINAL,
    ContractError,
    ErrorCode,
    Outcome,
    StaleMarker,
    Task,
    TaskStatus,
    TaskSummary,
)
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.boundary import where
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.echo import is_echo
from cotal_tasks.providers.hosted.http import RateLimited, RefusedBeforeSending, TrackerHttpError
from cotal_tasks.providers.hosted.mapping import project, same_record
from cotal_tasks.providers.hosted.tracker import TrackedIssue, Tracker
from cotal_tasks.providers.hosted.writeback import WritePlan, strip_marker
from cotal_tasks.providers.hosted.writes import Writes
from cotal_tasks.providers.provider import SeatUids, no_uids
from cotal_tasks.providers.store import (
    Committed,
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    IdempotencyRecord,
    Mirror,
    Page,
    PageQuery,
    RecordPage,
    RevisionConflict,
    StoredTask,
    SyncState,
    Write,
)

log = logging.getLogger(__name__)

_SYNC_ATTEMPTS = 5
UNFINISHED: frozenset[TaskStatus] = frozenset(STATUSES) - TERMINAL

ChangeHook = Callable[[int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Mirrored:
    """What mirroring a page did: records ``changed``; issues ``skipped`` as the echo of
    a write in flight or just mirrored (the snapshot says what the write sent); issues
    ``deferred`` (a snapshot that may predate such a write: read them again once it
    settles). A page with either must not move a validator or cursor past them."""

    changed: int
    skipped: frozenset[int] = frozenset()
    deferred: frozenset[int] = frozenset()

    @property
    def held_back(self) -> bool:
        return bool(self.skipped or self.deferred)


@dataclass
class SyncHealth:
    """What the last sync attempts said, for ``freshness`` and ``/healthz``."""

    last_success_ms: int | None = None
    failing: str | None = None
    failing_since_ms: int | None = None
    refused: bool = False  # the failure is a permanent refusal (401, 403, 404 of the listing)

    def succeeded(self, now: int) -> None:
        self.last_success_ms = now
        self.failing = None
        self.failing_since_ms = None
        self.refused = False

    def failed(self, reason: str, now: int, *, refused: bool = False) -> None:
        self.failing = reason[:400]
        self.failing_since_ms = self.failing_since_ms or now
        self.refused = refused

    def state(self) -> SyncState:
        """What the port's ``sync_state()`` answers."""
        return SyncState(self.last_success_ms, self.failing, self.failing_since_ms, self.refused)


def tracker_error(tracker: str, exc: Exception, outcome: Outcome) -> ContractError:
    """A tracker failure in the contract's terms, naming what to do about it."""
    status = exc.status if isinstance(exc, TrackerHttpError) else None
    if isinstance(exc, RefusedBeforeSending):
        what = f"nothing was written to {tracker}"
    else:
        what = f"{tracker} answered {status}" if status else f"{tracker} did not answer"
    detail = exc.message if isinstance(exc, TrackerHttpError) else str(exc)
    if isinstance(exc, RateLimited):
        return ContractError(
            ErrorCode.RESOURCE_EXHAUSTED,
            f"{tracker} rate-limits the bridge for a while. Retry after a few minutes",
            outcome=outcome,
        )
    code, remedy = {
        401: (ErrorCode.UNAVAILABLE, "Check the token in the endpoint's token_env"),
        403: (ErrorCode.PERMISSION_DENIED, "Give the token write access to the repository"),
        404: (ErrorCode.NOT_FOUND, "Check the repository or project and the issue exist"),
        410: (
            ErrorCode.NOT_FOUND,
            "The issue was deleted on the tracker. Leave the task: the sync marks it dropped "
            "when it reads the issue gone (a webhook, or the reconcile sweep)",
        ),
        400: (ErrorCode.FAILED_PRECONDITION, "Fix what the tracker names, then retry"),
        422: (ErrorCode.FAILED_PRECONDITION, "Fix what the tracker names, then retry"),
    }.get(status or 0, (ErrorCode.UNAVAILABLE, "Retry once the tracker answers again"))
    return ContractError(code, f"{what} ({detail}). {remedy}", outcome=outcome)


class MirroredReads:
    """The read half of a store whose tasks live in a local mirror (a board store): every
    read is the mirror's, never the source's. Hosted trackers and tower-do boards share it."""

    mirror: Mirror
    health: SyncHealth
    _on_change: list[ChangeHook]

    def on_change(self, hook: ChangeHook) -> None:
        """Hear every change the sync commits (the service hears its own writes)."""
        self._on_change.append(hook)

    async def get(self, task_id: str) -> StoredTask:
        return await self.mirror.get(task_id)

    async def page(self, query: PageQuery) -> Page:
        return await self.mirror.page(query)

    async def page_records(self, query: PageQuery) -> RecordPage:
        return await self.mirror.page_records(query)

    async def recall(self, key: str, not_before: int) -> IdempotencyRecord | None:
        return await self.mirror.recall(key, not_before)

    async def prune(self, before: int) -> int:
        return await self.mirror.prune(before)

    async def change_seq(self) -> int:
        return await self.mirror.change_seq()

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        return await self.mirror.history(task_id, limit)

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        return await self.mirror.history_page(query)

    async def sync_state(self) -> SyncState | None:
        return self.health.state()

    async def mirrored(
        self, statuses: frozenset[TaskStatus] | None = None
    ) -> AsyncIterator[TaskSummary]:
        """Every mirrored task (of ``statuses``), read a page of 500 at a time."""
        after: int | None = None
        while True:
            page = await self.mirror.page(PageQuery(500, after, statuses))
            for task in page.tasks:
                yield task
            if not page.more:
                return
            after = page.last

    async def close(self) -> None:
        await self.mirror.close()


class HostedStore(MirroredReads):
    """The ``TaskStore`` of one hosted tracker endpoint."""

    mirror: BoardStore  # its write ledger and checkpoints live in the board's database

    def __init__(
        self,
        mirror: BoardStore,
        tracker: Tracker,
        *,
        config: HostedConfig,
        plan: WritePlan,
        space: str,
        clock: Callable[[], int],
        seat_uids: SeatUids = no_uids,
        instance: str | None = None,
    ) -> None:
        self.mirror = mirror
        self.tracker = tracker
        self.config = config
        self.plan = plan
        self.space = space
        self.clock = clock
        self.seat_uids = seat_uids
        self.health = SyncHealth()
        self.writes = Writes(
            mirror,
            tracker,
            mirror.state(),
            config=config,
            plan=plan,
            clock=clock,
            project=self._project,
            error=lambda exc, outcome: tracker_error(tracker.name, exc, outcome),
            instance=instance,
        )
        self._on_change: list[ChangeHook] = []

    # -- reads: the mirror, never the tracker (``MirroredReads``) -------------------------
    async def prune(self, before: int) -> int:
        await self.writes.ledger.prune(before)
        return await super().prune(before)

    async def close(self) -> None:
        await self.writes.drain()
        await super().close()

    def degradations(self) -> dict[str, Any]:
        """Items the sync mapped without a refused part, or skipped: counts by reason."""
        return self.tracker.boundary.snapshot()

    async def freshness(self) -> StaleMarker | None:
        now = self.clock()
        health = self.health
        name = self.tracker.name
        if health.failing is not None:
            return StaleMarker(
                staleAsOf=health.last_success_ms or 0,
                reason=f"{name} sync is failing: {health.failing}"[:512],
            )
        if health.last_success_ms is None:
            return StaleMarker(staleAsOf=0, reason=f"the first {name} sync has not finished")
        age_s = (now - health.last_success_ms) / 1000
        if age_s > self.config.stale_after_s:
            return StaleMarker(
                staleAsOf=health.last_success_ms,
                reason=f"the last successful {name} sync was {age_s:.0f} s ago",
            )
        return None

    # -- writes: the tracker first, then the mirror (see ``writes``) --------------------
    async def commit(self, write: Write) -> Committed:
        return await self.writes.commit(write)

    async def _project(self, issue: TrackedIssue, existing: Task | None) -> Task:
        issue = replace(issue, body=strip_marker(issue.body))
        seats = self._seats_for(issue, existing)
        uids: dict[tuple[str, str], str | None] = {}
        for login in issue.assignees:
            principal = self.config.seats.get(login)
            if principal is not None:
                owner, actor = principal.split(".", 1)
                uids[(owner, actor)] = await self.seat_uids(owner, actor)
        boundary = self.tracker.boundary
        return project(
            issue,
            space=self.space,
            rules=self.config.status_rules,
            seats=seats,
            existing=existing,
            uid_of=lambda owner, actor: uids.get((owner, actor)),
            now=self.clock(),
            note=lambda reason, detail: boundary.note(reason, issue.task_id, detail),
        )

    def _seats_for(self, issue: TrackedIssue, existing: Task | None) -> Mapping[str, str]:
        """The seat directory to read ``issue`` with. Where an issue keeps one assignee
        (GitLab Free) a claim made through the endpoint rides on the claimed or blocked
        label alone: while the label stays, the bound seat stays bound even though its
        account is not the assignee."""
        seats = self.config.seats
        binding = existing.binding if existing is not None else None
        if not self.tracker.single_assignee or binding is None:
            return seats
        principal = f"{binding.owner}.{binding.actor}"
        labels = {label.casefold() for label in issue.native.labels}
        riding = {
            label.casefold()
            for status, label in self.plan.labels.items()
            if status in NEEDS_BINDING
        }
        assigned = {seats.get(login) for login in issue.assignees}
        if principal in assigned or not labels & riding:
            return seats
        return {login: who for login, who in seats.items() if who != principal}

    async def _synced_record(self, issue: TrackedIssue, existing: Task | None) -> Task | None:
        """The record a synced issue maps to, through the item boundary: ``None`` for an
        issue that left before it was ever mirrored, or one that does not map (counted)."""
        if issue.gone is not None and existing is None:
            return None
        try:
            return await self._project(issue, existing)
        except Exception as exc:  # one item never costs the page its other issues
            self.tracker.boundary.note("item-unmappable", issue.task_id, where(exc))
            return None

    # -- sync: the tracker's view into the mirror ---------------------------------------
    async def unfinished_numbers(self) -> set[int]:
        """The issue numbers of the mirrored tasks not yet done or dropped."""
        numbers = {self.tracker.number_of(task.taskId) async for task in self.mirrored(UNFINISHED)}
        return {number for number in numbers if number is not None}

    async def read_mark(self) -> int:
        """Take before reading the tracker; hand to ``upsert_page`` with what was read."""
        return await self.mirror.change_seq()

    async def upsert(self, issue: TrackedIssue, read_mark: int | None = None) -> bool:
        """Mirror one tracked issue; ``True`` when the record changed."""
        return await self.upsert_page([issue], read_mark) > 0

    async def upsert_page(
        self, issues: Sequence[TrackedIssue], read_mark: int | None = None
    ) -> int:
        """``mirror_page``, counting the records that changed."""
        return (await self.mirror_page(issues, read_mark)).changed

    async def mirror_page(
        self, issues: Sequence[TrackedIssue], read_mark: int | None = None
    ) -> Mirrored:
        """Mirror a page of tracked issues in one transaction.

        An issue with a write through the endpoint in flight, or mirrored after
        ``read_mark`` (the changeSeq when the tracker was read), is not applied: the
        snapshot may predate the write, and applying it would undo it. It is
        ``skipped`` as the write's echo only when it says what the write sent
        (``hosted.echo``); otherwise it is ``deferred``: read again once the write has
        settled, so a person's edit in the write's window is never taken for the echo.
        """
        if not issues:
            return Mirrored(0)
        for _ in range(_SYNC_ATTEMPTS):
            try:
                committed, skipped, deferred = await self._mirror_page(issues, read_mark)
                break
            except RevisionConflict:
                continue  # a write through the endpoint landed meanwhile: read again
        else:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                "the mirror kept changing under the sync. Wait for the next poll, which retries it",
            )
        if committed:
            await self.announce_change(committed[-1].change_seq)
        return Mirrored(len(committed), frozenset(skipped), frozenset(deferred))

    async def announce_change(self, change_seq: int) -> None:
        """Tell the hooks the mirror reached ``change_seq`` through a sync."""
        for hook in self._on_change:
            try:
                await hook(change_seq)
            except Exception:
                log.exception("change hook failed at changeSeq %d", change_seq)

    async def _mirror_page(
        self, issues: Sequence[TrackedIssue], read_mark: int | None
    ) -> tuple[list[Committed], set[int], set[int]]:
        ids = [issue.task_id for issue in issues]
        held = await self.mirror.get_many(ids)
        echoes: dict[str, frozenset[str]] = {}
        if read_mark is not None:
            echoes = await self.writes.ledger.echoes(ids, read_mark, self.clock())
        writes: list[Write] = []
        skipped: set[int] = set()
        deferred: set[int] = set()
        for issue in issues:
            stored = held.get(issue.task_id)
            record = await self._synced_record(issue, stored.task if stored else None)
            if record is None:
                continue
            if stored is not None and same_record(record, stored.task):
                continue  # nothing new
            sent = echoes.get(issue.task_id)
            if sent is not None:
                # Written through the endpoint meanwhile: the write commits what the
                # tracker holds after it. A snapshot saying exactly what it sent is its
                # echo; any other may predate it and is read again (never lost).
                (skipped if is_echo(record, sent) else deferred).add(issue.number)
                continue
            writes.append(
                Write(
                    record,
                    stored.revision if stored else None,
                    "sync",
                    f"{self.tracker.name}-sync",
                )
            )
        return await self.mirror.commit_many(writes), skipped, deferred
