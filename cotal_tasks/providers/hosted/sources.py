"""An endpoint over several sources of one tracker (repositories, projects), each with
its own parts, and what the endpoint shows of them together.

Every source has its own tracker (``Tracker.sibling``: the same HTTP client and item
boundary), its own sync loop under its own leader election, checkpoint
(``<tracker>:<source>``), health and webhook receiver; all of them mirror into the
endpoint's one mirror, under the one scope. So one source that fails (a repository that
answers 404, a token that lost access, an archived project) stops only its own loop: the
others go on, and each source's state is shown beside the others'.

``RoutedWrites`` sends a write to the source its task id names, and a created task to
the routed source (``HostedConfig.route``). ``SourcesHealth`` is the endpoint's health
over its sources: its reads are stale while any source is failing or behind (the tasks of
that source may not be current, and the marker names it), and it is refused for good
(not ready) only when every source is: one the tracker refuses (401, 403, 404 of its
listing) shows so in its own state while the others serve.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError
from cotal_tasks.providers.hosted.leader import Election
from cotal_tasks.providers.hosted.mirroring import MirrorSync
from cotal_tasks.providers.hosted.store import HostedStore, SyncHealth
from cotal_tasks.providers.hosted.sync import SyncEngine, SyncReport
from cotal_tasks.providers.hosted.tracker import Tracker
from cotal_tasks.providers.hosted.webhook import HookTarget
from cotal_tasks.providers.hosted.writes import Writes
from cotal_tasks.providers.provider import CatchUpReport, Progress
from cotal_tasks.providers.store import SourceState, SyncState, Write

log = logging.getLogger(__name__)


@dataclass
class Source:
    """One source of an endpoint (``path``: a repository, a project) and its parts."""

    path: str
    tracker: Tracker
    writes: Writes
    mirroring: MirrorSync
    sync: SyncEngine
    election: Election
    health: SyncHealth
    webhook: HookTarget | None

    def state(self) -> SourceState:
        health = self.health
        return SourceState(
            self.path,
            health.last_success_ms,
            health.failing,
            health.failing_since_ms,
            health.refused,
        )


class Discovering(Protocol):
    """The live sources of an endpoint whose tracker lists them
    (``hosted.discovery.Sources``), as the endpoint's parts read it."""

    @property
    def name(self) -> str:
        """Where they are discovered ("organization acme")."""
        ...

    def state(self) -> SourceState:
        """Discovery's own state, shown as one more source's."""
        ...

    async def start(self) -> None: ...

    async def rediscover(self) -> bool: ...

    async def run(self, stop: asyncio.Event) -> None: ...


class RoutedWrites:
    """The write path of an endpoint over several sources (``sources``: read live, as a
    discovering endpoint's grow and shrink)."""

    def __init__(self, sources: Sequence[Source], route: str, discovery: str | None = None) -> None:
        self.sources = sources
        self.route = route  # the source created tasks go to
        self.discovery = discovery  # where the sources are discovered, if they are

    def writes_for(self, write: Write) -> Writes:
        if write.expected_revision is not None:
            for source in self.sources:
                if source.tracker.number_of(write.task.taskId) is not None:
                    return source.writes
        # A create goes to the routed source. A task of no source (one that left: its
        # record says why, and the write is refused over it) or an id of none: any
        # source's path refuses it, naming the remedy.
        routed = next((s for s in self.sources if s.path == self.route), None)
        if routed is not None:
            return routed.writes
        if write.expected_revision is not None and self.sources:
            return self.sources[0].writes
        raise ContractError(
            ErrorCode.FAILED_PRECONDITION,
            f"the route {self.route} is not among the sources {self.discovery} lists now, so "
            "the bridge creates nothing. Restore it on the tracker, or set route to one it "
            "lists",
            outcome="not-executed",
        )

    async def drain(self) -> None:
        await asyncio.gather(*(source.writes.drain() for source in self.sources))


class SourcesHealth:
    """The endpoint's sync health over its sources (``HostedStore`` reads it as one);
    ``discovery`` shows the discovery of a discovering endpoint as one more of them."""

    def __init__(self, sources: Sequence[Source], discovery: Discovering | None = None) -> None:
        self.sources = sources
        self.discovery = discovery

    def _states(self) -> list[SourceState]:
        states = [source.state() for source in self.sources]
        return states if self.discovery is None else [self.discovery.state(), *states]

    @property
    def last_success_ms(self) -> int | None:
        """When every source had synced, as of the one behind the others."""
        stamps = [s.last_success_ms for s in self._states()]
        return None if None in stamps else min(s for s in stamps if s is not None)

    @property
    def failing(self) -> str | None:
        failing = [s for s in self._states() if s.failing is not None]
        if not failing:
            return None
        first = failing[0]
        more = f" (and {len(failing) - 1} more source(s))" if len(failing) > 1 else ""
        return f"{first.source}: {first.failing}{more}"[:400]

    @property
    def failing_since_ms(self) -> int | None:
        since = [s.failing_since_ms for s in self._states() if s.failing_since_ms]
        return min(since) if since else None

    @property
    def refused(self) -> bool:
        states = self._states()
        return bool(states) and all(s.refused for s in states)

    def report(self) -> SyncState:
        return SyncState(
            self.last_success_ms,
            self.failing,
            self.failing_since_ms,
            self.refused,
            sources=tuple(self._states()),
        )


@dataclass
class Roles:
    """This instance's part in the sync of an endpoint's sources (``SyncRole``): leader
    while it leads any of them, since the earliest it took its role."""

    sources: Sequence[Source]

    @property
    def role(self) -> str:
        roles = {source.election.role for source in self.sources}
        return "leader" if "leader" in roles else "follower"

    @property
    def since_ms(self) -> int | None:
        since = [s.election.since_ms for s in self.sources if s.election.since_ms is not None]
        return min(since) if since else None


@dataclass
class Hosted:
    """A hosted endpoint's parts, for its tools and tests (the bridge reads ``Built``'s
    declared fields, never these): the store over the mirror, the item boundary, the
    tracker's HTTP client, its settings, the endpoint's ``tracker`` (an endpoint over one
    source: that source's), and its ``sources`` (read live: ``discovering`` grows and
    shrinks them while it runs). ``mirroring``, ``sync``, ``election`` and ``webhook``
    are the first source's (an endpoint over one source: its only one)."""

    store: HostedStore
    tracker: Tracker
    boundary: ItemBoundary
    http: TrackerHttp
    tracker_config: HostedConfig
    sources: list[Source]
    discovering: Discovering | None = None

    @property
    def mirroring(self) -> MirrorSync:
        return self.sources[0].mirroring

    @property
    def sync(self) -> SyncEngine:
        return self.sources[0].sync

    @property
    def election(self) -> Election:
        return self.sources[0].election

    @property
    def webhook(self) -> HookTarget | None:
        return self.sources[0].webhook

    async def run(self, stop: asyncio.Event) -> None:
        """Sync every poll interval until ``stop``, each source on the instance its
        election makes leader (on SQLite, one instance: always this one); a discovering
        endpoint discovers on its schedule too, its sources' loops started and stopped
        as they join and leave."""
        if self.discovering is not None:
            await self.discovering.run(stop)
            return
        await asyncio.gather(*(source.election.run(stop) for source in self.sources))

    async def close(self) -> None:
        await self.http.client.aclose()

    @staticmethod
    def of(parts: object) -> Hosted | None:
        """``Built.parts`` as a hosted endpoint's parts, else ``None`` (tests and tools)."""
        return parts if isinstance(parts, Hosted) else None

    def source(self, path: str) -> Source:
        """The source ``path`` names (tests and tools)."""
        return next(s for s in self.sources if s.path.lower() == path.lower())

    async def catch_up(self, progress: Progress | None = None) -> CatchUpReport:
        """One poll of every source to the tracker's present (the CLI's ``sync``), with
        its report. Over several sources a failing one is reported and the others go
        on; when every one fails, the first failure is raised."""
        lines: list[str] = []
        if self.discovering is not None:
            found = await self.discovering.rediscover()
            name = self.discovering.name
            paths = ", ".join(s.path for s in self.sources) or "none"
            why = "" if found else f"discovery failed ({self.discovering.state().failing}); "
            lines.append(f"{name}: {why}{len(self.sources)} source(s): {paths}")
        elif len(self.sources) <= 1:
            report = await self.sync.poll_once(progress, present=True)
            return CatchUpReport(report_lines(report), dataclasses.asdict(report))
        total = SyncReport()
        each: dict[str, Any] = {}
        failures: list[Exception] = []
        for source in self.sources:
            try:
                report = await source.sync.poll_once(progress, present=True)
            except (TrackerHttpError, ContractError) as exc:
                failures.append(exc)
                reason = source.health.failing or str(exc)
                lines.append(f"{source.path}: failed ({reason}); the other sources go on")
                each[source.path] = {"failing": reason}
                continue
            lines += [f"{source.path}: {line}" for line in report_lines(report)]
            each[source.path] = dataclasses.asdict(report)
            _add(total, report)
        if failures and len(failures) == len(self.sources):
            raise failures[0]
        details = {**dataclasses.asdict(total), "sources": each}
        return CatchUpReport(tuple(lines), details)


def _add(total: SyncReport, report: SyncReport) -> None:
    """Sum ``report`` into ``total`` (its flags: any source's)."""
    for name, value in dataclasses.asdict(report).items():
        held = getattr(total, name)
        setattr(total, name, (held or value) if isinstance(value, bool) else held + value)


def report_lines(report: SyncReport) -> tuple[str, ...]:
    """What a poll did, as the CLI's ``sync`` prints it."""
    state = "unchanged (conditional requests answered 304)" if report.not_modified else "synced"
    lines = [
        f"{state}: {report.pages} page(s), {report.issues} issue(s) read, "
        f"{report.fetched} fetched with evidence, {report.changed} task(s) changed"
    ]
    if report.reconciled:
        lines.append(
            f"reconcile sweep: {report.sweep_requests} listing request(s), "
            f"{report.swept} unlisted unfinished task(s) read one by one"
        )
    return tuple(lines)
