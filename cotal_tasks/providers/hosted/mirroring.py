"""The sync's side of a hosted endpoint's mirror: tracked issues projected onto records
and committed, never over a write through the endpoint.

``Projection`` maps one tracked issue onto the contract's record with the endpoint's
settings (its status rules, its seat directory, the seats' lifecycle uids), through the
item boundary. ``MirrorSync`` commits a page of them in one transaction. It never
applies a snapshot of a task the write ledger says was written after the tracker was
read (or is being written): such an issue is ``skipped`` as the write's echo when it says
exactly what the write sent (``hosted.echo``), and ``deferred`` otherwise, to be read
again once the write settled; a person's edit in the write's window is never taken for
the echo. The sync loop (``hosted.sync``) holds its cursor and validators behind either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from cotal_tasks.core import (
    NEEDS_BINDING,
    STATUSES,
    TERMINAL,
    ContractError,
    ErrorCode,
    Task,
    TaskStatus,
)
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.boundary import ItemBoundary, where
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.echo import is_echo
from cotal_tasks.providers.hosted.ledger import Ledger
from cotal_tasks.providers.hosted.mapping import project, same_record
from cotal_tasks.providers.hosted.scope import left_out, left_scope, outside
from cotal_tasks.providers.hosted.store import every_task
from cotal_tasks.providers.hosted.tracker import TrackedIssue, Tracker
from cotal_tasks.providers.hosted.writeback import WritePlan, strip_marker
from cotal_tasks.providers.provider import SeatUids
from cotal_tasks.providers.store import Committed, RevisionConflict, Write

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


class Projection:
    """A tracked issue as the endpoint's record, with its settings and seat directory."""

    def __init__(
        self,
        tracker: Tracker,
        boundary: ItemBoundary,
        *,
        config: HostedConfig,
        plan: WritePlan,
        space: str,
        clock: Callable[[], int],
        seat_uids: SeatUids,
    ) -> None:
        self.tracker = tracker
        self.boundary = boundary
        self.config = config
        self.plan = plan
        self.space = space
        self.clock = clock
        self.seat_uids = seat_uids

    async def record(self, issue: TrackedIssue, existing: Task | None) -> Task:
        """The record ``issue`` maps to over ``existing`` (refused parts counted); an issue
        outside the endpoint's scope maps as having left it (``hosted.scope``)."""
        cfg = self.config
        why = None
        if issue.gone is None:
            why = outside(cfg.scope, issue, cfg.seats, cfg.outside_natively)
        body = strip_marker(issue.body)
        if body != issue.body or why != issue.out_of_scope:  # most issues: neither
            issue = replace(issue, body=body, out_of_scope=why)
        seats = self._seats_for(issue, existing)
        uids: dict[tuple[str, str], str | None] = {}
        for login in issue.assignees:
            principal = self.config.seats.get(login)
            if principal is not None:
                owner, actor = principal.split(".", 1)
                uids[(owner, actor)] = await self.seat_uids(owner, actor)
        boundary = self.boundary
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

    async def synced(self, issue: TrackedIssue, existing: Task | None) -> Task | None:
        """The record a synced issue maps to, through the item boundary: ``None`` for an
        issue that left before it was ever mirrored, one outside the scope or closed before
        its import horizon that has no task (``hosted.scope``), or one that does not map
        (counted)."""
        if existing is None and self.left_out(issue) is not None:
            return None
        try:
            return await self.record(issue, existing)
        except Exception as exc:  # one item never costs the page its other issues
            self.boundary.note("item-unmappable", issue.task_id, where(exc))
            return None

    def left_out(self, issue: TrackedIssue) -> str | None:
        """Why an issue with no task is not taken (gone, outside the scope, closed before
        the import horizon), or ``None``: it is."""
        if issue.gone is not None:
            return issue.gone
        cfg = self.config
        return left_out(cfg.scope, issue, cfg.seats, self.clock(), cfg.outside_natively)

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


class MirrorSync:
    """Commits what the sync read into the mirror, and tells the change hooks."""

    def __init__(
        self,
        mirror: BoardStore,
        ledger: Ledger,
        projection: Projection,
        tracker: Tracker,
        *,
        clock: Callable[[], int],
        hooks: list[ChangeHook],
    ) -> None:
        self.mirror = mirror
        self.ledger = ledger
        self.projection = projection
        self.tracker = tracker
        self.clock = clock
        self.hooks = hooks  # the store's ``on_change`` adds to the same list

    async def change_seq(self) -> int:
        return await self.mirror.change_seq()

    async def read_mark(self) -> int:
        """Take before reading the tracker; hand to ``mirror_page`` with what was read."""
        return await self.mirror.change_seq()

    async def unfinished_numbers(self) -> set[int]:
        """The issue numbers of the mirrored tasks not yet done or dropped."""
        tasks = every_task(self.mirror, UNFINISHED)
        numbers = {self.tracker.number_of(task.taskId) async for task in tasks}
        return {number for number in numbers if number is not None}

    async def left_numbers(self) -> set[int]:
        """The issue numbers of the mirrored tasks whose issue left the scope."""
        tasks = every_task(self.mirror, TERMINAL)  # a left task is done or dropped
        numbers = {
            self.tracker.number_of(task.taskId)
            async for task in tasks
            if left_scope(task.statusSource)
        }
        return {number for number in numbers if number is not None}

    async def mirrored(self, numbers: Iterable[int]) -> set[int]:
        """Those of ``numbers`` whose issue has a task in the mirror."""
        ids = {self.tracker.task_id_of(number): number for number in numbers}
        held = await self.mirror.get_many(list(ids)) if ids else {}
        return {ids[task_id] for task_id in held}

    async def upsert(self, issue: TrackedIssue, read_mark: int | None = None) -> bool:
        """Mirror one tracked issue; ``True`` when the record changed."""
        return (await self.mirror_page([issue], read_mark)).changed > 0

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
        for hook in self.hooks:
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
            echoes = await self.ledger.echoes(ids, read_mark, self.clock())
        writes: list[Write] = []
        skipped: set[int] = set()
        deferred: set[int] = set()
        for issue in issues:
            stored = held.get(issue.task_id)
            record = await self.projection.synced(issue, stored.task if stored else None)
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
