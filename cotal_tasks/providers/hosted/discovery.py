"""An endpoint whose sources the tracker lists (a GitHub organization's repositories, or
those of an App installation): discovered when the endpoint is built, again every
``interval_s`` and at once when a webhook says the set changed. Tracker-neutral: a
tracker hands over how it lists its sources (``Discovery.find``); the rest is here.

- **Joining.** A source listed for the first time gets its own parts (``make``: tracker,
  sync loop, election, checkpoint, health, webhook receiver), added to the running
  endpoint: its loop starts beside the others, its state shows in ``/healthz``,
  ``/metrics`` and the sync summary, its deliveries are routed to it.
- **Leaving.** A source no longer listed (deleted, moved, archived, taken out of the
  installation, or its name no longer picked) stops syncing, and every task of it
  becomes ``dropped`` (a ``done`` one stays ``done``), its ``statusSource`` saying why
  (``out of scope: acme/web left the organization``), its binding kept: the scope's rule
  for an issue that leaves (``hosted.scope``), so a write to it is refused
  (failed-precondition, nothing written) and nothing silently vanishes from ``get-task``.
- **Coming back.** A source listed again after it left reads every issue again, the
  import horizon aside (the tasks it left behind are older than any horizon may be), so
  each of its tasks maps from its issue again: same id, its history kept.
- **Remembered.** What discovery found is kept beside the mirror (``key``: the sources,
  and those that left with why): a restart knows a source that left while the bridge was
  down, and a discovery that fails at start syncs the sources known before.
- **Contained.** A failing discovery keeps every known source syncing; it shows as a
  source of the endpoint of its own (named ``Discovery.name``), so the reads are marked
  stale and ``/healthz`` says why, and it is tried again every poll interval.

Every instance on a shared mirror discovers for itself (a read, and leaving is written
idempotently); a webhook asking for discovery reaches the instance it was delivered to,
the others follow at their next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.core.models import SOURCE_BYTES
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.mirroring import MirrorSync
from cotal_tasks.providers.hosted.scope import OUT_OF_SCOPE, left_status
from cotal_tasks.providers.hosted.sources import Source
from cotal_tasks.providers.hosted.store import SyncHealth, every_task
from cotal_tasks.providers.hosted.sync import refusal
from cotal_tasks.providers.provider import WebhookReceiver
from cotal_tasks.providers.store import RevisionConflict, SourceState, Write

log = logging.getLogger(__name__)

BATCH = 100  # tasks marked as left per transaction
ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Found:
    """What one discovery listed: the sources to read, in order, and those listed but not
    taken, each with why (``"archived"``, ``"not in include/exclude"``)."""

    paths: tuple[str, ...]
    passed_over: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Discovery:
    """How a tracker lists an endpoint's sources: ``find`` (raises ``TrackerHttpError``
    when the tracker refuses or does not answer), under ``name`` ("organization acme"),
    every ``interval_s`` (0: when the endpoint is built, and when a webhook asks);
    ``gone`` says why a source no longer listed at all left ("left the organization").
    ``absent`` asks the tracker about one source the listing left out entirely, before it
    leaves: why it is gone ("renamed or moved"; ``gone`` when the tracker does not say),
    or ``None``: it is there and taken all the same (a listing paged while sources were
    deleted or created can skip one; a source must not leave for that)."""

    name: str
    find: Callable[[], Awaitable[Found]]
    absent: Callable[[str], Awaitable[str | None]]
    interval_s: float
    gone: str
    retry_s: float  # after a failure, the next try (the poll interval)


def left_reason(path: str, why: str) -> str:
    """A left task's ``statusSource``: the source and why, within the record's bound (a
    path too long for it is left out: the task id names it)."""
    said = f"{OUT_OF_SCOPE}: {path} {why}"
    if len(said.encode()) > SOURCE_BYTES:
        said = f"{OUT_OF_SCOPE}: source {why}"  # the reasons are short, plain ASCII
    return said


class Sources:
    """The live sources of a discovering endpoint: the list every part reads (writes are
    routed over it, the health and roles read it, the webhook route finds receivers in
    ``receivers``), grown and shrunk by discovery while the endpoint runs."""

    def __init__(
        self,
        discovery: Discovery,
        make: Callable[[str], Source],
        *,
        sources: list[Source],
        receivers: list[WebhookReceiver],
        checkpoints: Checkpoints,
        key: str,
        clock: Callable[[], int],
    ) -> None:
        self.discovery = discovery
        self.make = make
        self.sources = sources
        self.receivers = receivers
        self.checkpoints = checkpoints
        self.key = key  # beside the checkpoints: what discovery found
        self.clock = clock
        self.health = SyncHealth()
        self._lock = asyncio.Lock()
        self._woken = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._halts: dict[str, asyncio.Event] = {}
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._reported: str | None = None

    @property
    def name(self) -> str:
        return self.discovery.name

    def state(self) -> SourceState:
        """Discovery's own state, shown beside the sources'."""
        h = self.health
        return SourceState(
            self.discovery.name, h.last_success_ms, h.failing, h.failing_since_ms, h.refused
        )

    def soon(self) -> None:
        """Discover again at once (a webhook said the set changed)."""
        self._woken.set()

    async def start(self) -> None:
        """The first discovery, when the endpoint is built; should it fail, the sources
        known from the last one."""
        if not await self.rediscover():
            saved = await self._saved()
            for path in saved.get("sources") or ():
                if isinstance(path, str) and self._running(path) is None:
                    self._add(self.make(path))

    async def rediscover(self) -> bool:
        """List the sources and apply what changed; ``False`` when the listing failed
        (recorded in the health; the known sources go on)."""
        async with self._lock:
            try:
                await self._apply(await self.discovery.find())
            except (TrackerHttpError, ContractError) as exc:  # the tracker's, or the mirror's
                reason = exc.message if isinstance(exc, ContractError) else str(exc)
                self.health.failed(reason, self.clock(), refused=refusal(exc))
                if reason != self._reported:
                    self._reported = reason
                    name = self.discovery.name
                    log.warning("%s: discovery failed (%s); the known sources go on", name, reason)
                return False
            self.health.succeeded(self.clock())
            self._reported = None
            return True

    async def _saved(self) -> dict[str, Any]:
        return dict(await self.checkpoints.load(self.key) or {})

    def _running(self, path: str) -> Source | None:
        return next((s for s in self.sources if s.path == path), None)

    async def _apply(self, found: Found) -> None:
        saved = await self._saved()
        known = {p for p in saved.get("sources") or () if isinstance(p, str)}
        left_before = saved.get("left")
        left: dict[str, str] = dict(left_before) if isinstance(left_before, dict) else {}
        listed = set(found.paths)
        unlisted = (known | {s.path for s in self.sources}) - listed
        why_gone = dict(found.passed_over)
        for path in sorted(unlisted - set(why_gone)):
            why = await self.discovery.absent(path)
            if why is None:  # skipped by a shifting listing: it stays
                listed.add(path)
            else:
                why_gone[path] = why
        paths = (*found.paths, *sorted(listed - set(found.paths)))
        for path in paths:
            if self._running(path) is not None:
                continue
            source = self.make(path)
            if path in left:  # back: read every issue again, its tasks map anew
                await source.sync.ask_reread(whole=True)
                del left[path]
            self._add(source)
            log.info("%s: %s joins the endpoint", self.discovery.name, path)
        for path in sorted(unlisted - listed):
            why = left_reason(path, why_gone.get(path) or self.discovery.gone)
            running = self._running(path)
            if running is not None:
                await self._remove(running)
            marked = await leave((running or self.make(path)).mirroring, why, self.clock())
            left[path] = why
            name = self.discovery.name
            log.info("%s: %s left the endpoint; %d task(s) marked", name, path, marked)
        await self.checkpoints.save(self.key, {"sources": list(paths), "left": left}, self.clock())

    def _add(self, source: Source) -> None:
        self.sources.append(source)
        if source.webhook is not None:
            self.receivers.append(source.webhook)
        if self._group is not None:
            self._start(source)

    def _start(self, source: Source) -> None:
        assert self._group is not None
        halt = asyncio.Event()
        self._halts[source.path] = halt
        self._loops[source.path] = self._group.create_task(self._contained(source, halt))

    async def _contained(self, source: Source, halt: asyncio.Event) -> None:
        """``source``'s loop until ``halt``: an unexpected failure of it (its election's
        database, a bug) is logged, shown in its state and retried after the retry
        interval, so it never cancels the other sources' loops in the task group."""
        while not halt.is_set():
            try:
                await source.election.run(halt)
                return
            except Exception:
                log.exception(
                    "%s: the loop of %s failed unexpectedly; restarting", self.name, source.path
                )
                source.health.failed("unexpected error (see the bridge log)", self.clock())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(halt.wait(), self.discovery.retry_s)

    async def _remove(self, source: Source) -> None:
        self.sources.remove(source)
        if source.webhook is not None and source.webhook in self.receivers:
            self.receivers.remove(source.webhook)
        halt, loop = self._halts.pop(source.path, None), self._loops.pop(source.path, None)
        if halt is not None and loop is not None:
            halt.set()
            await loop  # its poll in flight ends, its lease is handed on
        await source.writes.drain()

    async def run(self, stop: asyncio.Event) -> None:
        """Every source's loop, and discovery on its schedule, until ``stop``; a source
        that joins meanwhile starts its loop, one that leaves stops its own."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for source in self.sources:
                    self._start(source)
                try:
                    await self._discovering(stop)
                finally:
                    for halt in self._halts.values():
                        halt.set()
        finally:
            self._group = None
            self._halts.clear()
            self._loops.clear()

    async def _discovering(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wait: float | None = self.discovery.interval_s or None
            if self.health.failing is not None:
                wait = self.discovery.retry_s
            stopped = asyncio.ensure_future(stop.wait())
            woken = asyncio.ensure_future(self._woken.wait())
            try:
                await asyncio.wait({stopped, woken}, timeout=wait, return_when="FIRST_COMPLETED")
            finally:
                for waiting in (stopped, woken):
                    waiting.cancel()
            if stop.is_set():
                return
            self._woken.clear()
            try:
                await self.rediscover()  # a tracker's or the mirror's failure: its state
            except Exception:  # anything else never stops the sources' loops
                log.exception("%s: discovery failed unexpectedly; retrying", self.name)
                self.health.failed("unexpected error (see the bridge log)", self.clock())


async def leave(mirroring: MirrorSync, why: str, now: int) -> int:
    """Mark every task of ``mirroring``'s source ``dropped`` (a ``done`` one stays
    ``done``) with ``why`` as its ``statusSource``, its binding kept (the scope's leave
    rule); the tasks marked."""
    tracker, mirror = mirroring.tracker, mirroring.mirror
    ids = [t.taskId async for t in every_task(mirror) if tracker.number_of(t.taskId) is not None]
    marked = 0
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        for _ in range(ATTEMPTS):
            held = await mirror.get_many(batch)
            writes = [
                Write(_left(stored.task, why, now), stored.revision, "sync", f"{tracker.name}-sync")
                for stored in held.values()
                if (stored.task.status, stored.task.statusSource)
                != (left_status(stored.task.status), why)
            ]
            try:
                committed = await mirror.commit_many(writes)
                break
            except RevisionConflict:
                continue  # a write through the endpoint landed meanwhile: read again
        else:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                "the mirror kept changing while a source's tasks were marked as left. The "
                "next discovery tries again",
            )
        marked += len(committed)
        if committed:
            await mirroring.announce_change(committed[-1].change_seq)
    return marked


def _left(task: Task, why: str, now: int) -> Task:
    data = task.model_dump()
    status = left_status(task.status)
    data.update(status=status, statusSource=why, updatedAt=max(now, task.updatedAt))
    return Task.model_validate(data)
