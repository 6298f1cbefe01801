"""The sync loop: polling is the source of truth, webhooks only wake it.

An issue the store did not apply because a write through the endpoint was in flight or
had just been mirrored (skipped as the write's echo, or deferred: see
``MirrorSync.mirror_page``) holds the cursor and every validator of the poll where
they were, and a deferred one is read again, one by one, until it is applied.

Each poll walks the issues updated since the cursor (the highest ``updated_at`` seen,
re-read with a small overlap), oldest first, checkpointing the cursor after every page,
so a crash or a rate limit resumes where it stopped rather than starting over. The walk
itself (the tracker's) loses no issue that changes while it runs (``hosted.paging``), and
runs one page ahead of the commits: the tracker answers the next page while this one is
mapped and committed (``hosted.ahead``), and the checkpoint still passes only what was
committed. An
unchanged repository costs the tracker's cheapest answers (conditional requests answered
304 where it offers them). The tracker reads the evidence of the issues changed on a
page with that page; issues a pull or merge request names that the walk did not bring,
and issues a webhook names, are fetched one by one with their evidence afterwards. A
task is never closed because its issue is missing from a page.

An issue can leave without changing anything a poll sees (deleted, or transferred to
another repository): every ``reconcile_interval_s`` the poll also lists the open issues
and reads, one by one, each mirrored unfinished task's issue that is not among them, and
mirrors what the tracker says of it (closed, or gone: ``dropped`` with the reason).

Some edits change what issues map to without moving their ``updated_at`` (a label renamed
or deleted on a repository with more of its issues than a webhook refreshes): a delivery
then asks for a full re-read (``ask_reread``, kept beside the checkpoint, so the leader
on another instance takes it too), and the next poll walks the listing from the start,
asking no validator; the request is cleared once that poll has read it through. So does
a mirror written by an older mapping (``MAPPING_REVISION``, kept beside the checkpoint):
an issue no one touched since would otherwise keep the old mapping's record for good.

A delivery that says the source moved beyond the issues it names (a push) leaves its mark
beside the checkpoint (``moved``, so the leader on another instance sees it too); each
poll hands the latest to the tracker (``remembered[MOVED]``), which reads what it
otherwise reads on its own cadence (GitHub's issue events feed) at once. A poll to the
tracker's present (``poll_once(present=True)``: the CLI's ``sync``) has the tracker read
it whatever its cadence (``remembered[PRESENT]``); the cadence's checkpoint is kept as
after any read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.core import ContractError
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.hosted.ahead import one_ahead
from cotal_tasks.providers.hosted.boundary import ItemBoundary, where
from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttpError
from cotal_tasks.providers.hosted.mirroring import MirrorSync
from cotal_tasks.providers.hosted.refreshes import RefreshQueue
from cotal_tasks.providers.hosted.scope import HORIZON, Scope, horizon_edge
from cotal_tasks.providers.hosted.store import SyncHealth
from cotal_tasks.providers.hosted.tracker import MOVED, PRESENT, Tracker
from cotal_tasks.providers.hosted.wakes import process_holder

log = logging.getLogger(__name__)

OWED = "owed"  # the checkpoint's issues whose evidence is still to be read
REREAD = ":reread"  # beside the checkpoint (its key and this): a full re-read is asked
WHOLE = "whole"  # in it: the import horizon aside
MAPPING = ":mapping"  # beside the checkpoint: the mapping revision the mirror was read with
MOVED_AT = ":moved"  # beside the checkpoint: the last delivery that said the source moved
# The mapping's revision: raised when the same issue maps to another record (2: a brief
# keeps its line structure), so a mirror read with an older one is read again in full.
MAPPING_REVISION = 2

Progress = Callable[[int, int | None], None]  # (pages done, total pages if known)


@dataclass
class SyncReport:
    pages: int = 0
    issues: int = 0
    changed: int = 0
    fetched: int = 0
    not_modified: bool = False
    reconciled: bool = False  # the reconcile sweep ran in this poll
    sweep_requests: int = 0  # its listing of the open issues, in requests
    # Unfinished tasks whose issue it did not list, and tasks that left the scope whose
    # issue it lists again: read one by one.
    swept: int = 0
    # Issues not applied because a write through the endpoint was in flight or had just
    # been mirrored: skipped as its echo, or deferred to be read again.
    skipped: int = 0
    deferred: int = 0
    owed: int = 0  # issues whose evidence could not be read: read again once it answers


@dataclass
class SyncEngine:
    """The sync loop of one hosted endpoint, handed its parts: the tracker it reads, the
    item boundary it records degraded items in, the mirror it commits to, the checkpoint
    (``checkpoints`` under ``key``) and the health it reports."""

    tracker: Tracker
    boundary: ItemBoundary
    mirror: MirrorSync
    checkpoints: Checkpoints
    key: str  # the checkpoint's name, e.g. "github:acme/widgets"
    clock: Callable[[], int]
    health: SyncHealth
    reconcile_interval_s: float  # the reconcile sweep's cadence (0: never)
    refreshes_per_minute: float  # webhook refreshes let out at most at this rate
    scope: Scope = field(default_factory=Scope)  # its import horizon reaches the listing
    holder: str = field(default_factory=process_holder)  # this instance, among those sharing
    _woken: RefreshQueue = field(init=False)  # what webhooks asked for, let out at a rate
    _deferred: set[int] = field(default_factory=set)  # to read again: a write was in flight
    _owed: set[int] = field(default_factory=set)  # to read again: evidence did not answer
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _mapping_checked: bool = False  # the mirror's mapping revision was checked this run
    # Told of each reconcile sweep (listing requests, unlisted tasks read): the metrics.
    sweep_observers: list[Callable[[int, int], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._woken = RefreshQueue(self.refreshes_per_minute)

    async def checkpoint(self) -> dict[str, Any]:
        return await self.checkpoints.load(self.key) or {}

    async def poll_once(
        self, progress: Progress | None = None, *, present: bool = False
    ) -> SyncReport:
        """One poll; records success or failure in the endpoint's health, and re-raises.
        ``present``: to the tracker's present, whatever the tracker's own cadences (see
        the module's description)."""
        try:
            report = await self._poll(progress, present)
        except (TrackerHttpError, ContractError) as exc:
            self.health.failed(_describe(exc), self.clock(), refused=refusal(exc))
            raise
        self.health.succeeded(self.clock())
        return report

    async def ask_reread(self, *, whole: bool = False) -> None:
        """Ask the next poll to read every issue again (see the module's description);
        ``whole``: the import horizon aside (a source coming back, ``hosted.discovery``)."""
        asked = {"at": self.clock(), **({WHOLE: True} if whole else {})}
        await self.checkpoints.save(self.key + REREAD, asked, self.clock())

    def moved(self, mark: str) -> dict[str, dict[str, Any]]:
        """What to keep when a delivery (its id: ``mark``) says the source moved, so the
        next poll tells the tracker (see the module's description): checkpoint values,
        written with the delivery's record in one commit."""
        return {self.key + MOVED_AT: {MOVED: mark}}

    async def _mapped_anew(self, saved: Mapping[str, Any]) -> None:
        """Ask a full re-read when the mirror was read with an older mapping revision (a
        first import reads everything anyway), and record the current one."""
        if self._mapping_checked:
            return
        held = await self.checkpoints.load(self.key + MAPPING)
        if held is None or held.get("revision") != MAPPING_REVISION:
            if saved:
                log.info("%s: the mapping changed since the mirror was read; reading all", self.key)
                await self.ask_reread()
            await self.checkpoints.save(
                self.key + MAPPING, {"revision": MAPPING_REVISION}, self.clock()
            )
        self._mapping_checked = True

    async def _poll(self, progress: Progress | None, present: bool) -> SyncReport:
        tracker = self.tracker
        saved = await self.checkpoint()
        await self._mapped_anew(saved)
        asked = await self.checkpoints.load(self.key + REREAD)
        cursor: str | None = None if asked else saved.get("cursor")
        report = SyncReport()
        # Issues owed an evidence read survive an interruption: they are checkpointed too.
        linked: set[int] = set(saved.get("pending") or ())
        self._owed |= set(saved.get(OWED) or ())
        total: int | None = None
        mark = await self.mirror.read_mark()
        held_back = False  # a page held an issue not applied: nothing moves past it
        rescoped: set[int] = set()
        remembered = {} if asked else saved
        edge = None if asked and asked.get(WHOLE) else horizon_edge(self.scope, self.clock())
        if edge is not None:
            remembered = {**remembered, HORIZON: edge}
        if moved := await self.checkpoints.load(self.key + MOVED_AT):
            remembered = {**remembered, MOVED: moved.get(MOVED)}
        if present:
            remembered = {**remembered, PRESENT: True}
        # The next page is fetched while this one is committed (``hosted.ahead``); the
        # cursor and the validators still pass only what was committed.
        async with one_ahead(tracker.list_changed(cursor, remembered)) as pages:
            async for page in pages:
                if page.not_modified:
                    report.not_modified = True
                    break
                report.pages += page.pages
                report.issues += len(page.issues) - page.fetched
                report.fetched += page.fetched
                mirrored = await self.mirror.mirror_page(page.issues, mark)
                report.changed += mirrored.changed
                report.skipped += len(mirrored.skipped)
                report.deferred += len(mirrored.deferred)
                held_back = held_back or mirrored.held_back
                linked = (linked - page.evidenced) | (page.linked - page.evidenced)
                linked |= mirrored.deferred
                rescoped |= page.rescoped
                self._owed |= page.owed
                if page.cursor is not None and not held_back:
                    cursor = page.cursor
                # Neither the cursor nor a validator (an ETag, a feed's mark) passes an issue
                # that was not applied: the next poll reads it again, whatever else changed.
                remember = {} if held_back else (page.remember or {})
                saved = {**saved, **remember, "cursor": cursor, "pending": sorted(linked)}
                await self.checkpoints.save(self.key, saved, self.clock())  # checkpoint every page
                total = page.total_pages or total
                if total is not None:  # an estimate: a walk may take a page more than it said
                    total = max(total, report.pages)
                if progress is not None:
                    progress(report.pages, total)
        numbers = linked | self._take_woken() | self._owed_to_read(self.boundary.unavailable)
        # An event may have taken these out of the scope, where no scoped listing shows
        # them: those with a task are read again and checked (``hosted.scope``).
        numbers |= await self.mirror.mirrored(rescoped - numbers)
        fetched, changed = await self.refresh(numbers)
        report.fetched += fetched
        report.changed += changed
        again = sorted(self._take_deferred())
        report.deferred += len(again)
        owed = sorted(self._owed)
        report.owed = len(owed)
        if saved.get("pending") or again or saved.get(OWED) != owed:
            saved = {**saved, "pending": again, OWED: owed}
            await self.checkpoints.save(self.key, saved, self.clock())
        if asked and await self.checkpoints.load(self.key + REREAD) == asked:
            await self.checkpoints.save(self.key + REREAD, {}, self.clock())  # read through
        await self._reconcile_if_due(saved, report)
        return report

    async def _reconcile_if_due(self, saved: dict[str, Any], report: SyncReport) -> None:
        """The reconcile sweep, once every ``reconcile_interval_s`` (checkpointed, so a
        restart or another leader keeps the cadence). The first poll only starts the
        clock: an import has just read every issue."""
        interval_ms = self.reconcile_interval_s * 1000
        if interval_ms <= 0:
            return
        last = saved.get("reconciled_at")
        now = self.clock()
        if isinstance(last, int) and now - last < interval_ms:
            return
        if isinstance(last, int):
            await self.reconcile(report)
        await self.checkpoints.save(self.key, {**saved, "reconciled_at": now}, self.clock())

    async def reconcile(self, report: SyncReport | None = None) -> SyncReport:
        """List the open issues; read each mirrored unfinished task's issue that is not
        among them, and each task's that left the scope and is among them again (a
        project back in a group: nothing of the issue changed), and mirror what the
        tracker says of it."""
        report = report or SyncReport()
        listed, requests = await self.tracker.open_numbers()
        absent = await self.mirror.unfinished_numbers() - listed
        absent |= await self.mirror.left_numbers() & listed
        fetched, changed = await self.refresh(absent)
        report.reconciled = True
        report.sweep_requests += requests
        report.swept += len(absent)
        report.fetched += fetched
        report.changed += changed
        for observer in self.sweep_observers:
            try:
                observer(requests, len(absent))
            except Exception:  # an observer never costs the sync its sweep
                log.exception("a reconcile observer failed")
        log.info(
            "%s reconcile sweep: %d open issue(s) listed in %d request(s); %d unfinished "
            "task(s) not listed, read one by one; %d changed",
            self.key,
            len(listed),
            requests,
            len(absent),
            changed,
        )
        return report

    async def refresh(self, numbers: Iterable[int]) -> tuple[int, int]:
        """Fetch each issue with its evidence and mirror it; (fetched, changed)."""
        fetched = changed = 0
        for number in sorted(numbers):
            try:
                mark = await self.mirror.read_mark()
                issue = await self.tracker.fetch(number)
            except (RateLimited, ContractError):
                raise  # the tracker's limit or the mirror's failure: the whole poll waits
            except TrackerHttpError as exc:
                # One unreadable issue (hidden, refused) must not cost the others their
                # evidence: the poll goes on, and counts it.
                self.boundary.note("issue-unreadable", f"issue {number}", str(exc))
                continue
            except Exception as exc:  # the boundary: one item never stops the sync
                self.boundary.note("item-unmappable", f"issue {number}", where(exc))
                continue
            fetched += 1
            if issue is not None:
                if issue.evidence_unread:
                    self._owed.add(number)
                mirrored = await self.mirror.mirror_page([issue], mark)
                changed += mirrored.changed
                self._deferred |= mirrored.deferred
        return fetched, changed

    def _owed_to_read(self, unavailable: Mapping[str, str]) -> set[int]:
        """The owed issues to read again now: all of them while the evidence endpoint
        answers, one (a probe) while it does not."""
        owed = sorted(self._owed)
        taken = set(owed if not unavailable else owed[:1])
        self._owed -= taken
        return taken

    def _take_deferred(self) -> set[int]:
        taken, self._deferred = self._deferred, set()
        return taken

    async def _keep_deferred(self) -> None:
        """Issues a refresh deferred (a write was in flight) wait in the checkpoint for
        the next poll, which reads them again."""
        again = self._take_deferred()
        if again:
            saved = await self.checkpoint()
            pending = sorted(set(saved.get("pending") or ()) | again)
            await self.checkpoints.save(self.key, {**saved, "pending": pending}, self.clock())

    def wake(self, numbers: Iterable[int]) -> None:
        """A webhook named these issues (none: poll): fetch them soon, at the endpoint's
        refresh rate (``hosted.refreshes``)."""
        self._woken.add(numbers)
        self._wake.set()

    async def refresh_woken(self) -> None:
        """Read the issues webhooks named since the last turn; those a write in flight
        deferred wait in the checkpoint for the next poll."""
        await self.refresh(self._take_woken())
        await self._keep_deferred()

    def _take_woken(self) -> set[int]:
        return self._woken.take()

    async def run(self, interval_s: float, stop: asyncio.Event) -> None:
        """Poll every ``interval_s`` until ``stop`` is set; between polls, refresh what
        webhooks named as the refresh rate lets out. The poll is due on its own clock:
        no number of wakes puts it off."""
        loop = asyncio.get_running_loop()
        next_poll = loop.time()
        reported: str | None = None  # the failure last logged
        while not stop.is_set():
            self._wake.clear()  # before the work: a wake-up during it is not lost
            try:
                if (
                    loop.time() >= next_poll
                    or self.health.last_success_ms is None
                    or self._woken.take_poll()
                ):
                    next_poll = loop.time() + interval_s
                    self._woken.clear_poll()
                    await self.poll_once()
                elif self._woken.pending:
                    await self.refresh_woken()
                if reported is not None and self.health.failing is None:
                    log.warning("%s sync recovered", self.key)
                    reported = None
            except RateLimited as exc:
                wait = max(1.0, exc.until_s - self.clock() / 1000)
                log.warning("%s rate limit: resuming from the checkpoint in %.0f s", self.key, wait)
                await _sleep_or(stop, wait)
                next_poll = loop.time()  # the wait is over: resume the poll at once
                continue
            except (TrackerHttpError, ContractError) as exc:
                reason = _describe(exc)
                if reason != reported:  # once per cause, not once per poll
                    reported = reason
                    what = "refused for good" if refusal(exc) else "failed"
                    log.warning("%s sync %s: %s; retrying each poll", self.key, what, reason)
            except Exception:
                log.exception("%s sync failed unexpectedly; retrying next poll", self.key)
                self.health.failed("unexpected error (see the bridge log)", self.clock())
            wait = next_poll - loop.time()
            if self.health.failing is None:  # woken: refresh soon, not at the next poll
                wait = min(wait, self._woken.ready_in_s())
            if wait <= 0:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(stop.wait(), self._wake.wait()), timeout=wait)


PERMANENT_STATUS = frozenset({401, 403, 404})  # of the listing: no retry can succeed


def refusal(exc: Exception) -> bool:
    """The tracker refuses the whole sync for good (a wrong token, no access to the
    repository, no such repository): the operator must act."""
    return (
        isinstance(exc, TrackerHttpError)
        and not isinstance(exc, RateLimited)
        and exc.status in PERMANENT_STATUS
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, ContractError):
        return exc.message
    return str(exc)


async def _sleep_or(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def _first(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
