"""A hosted tracker as a ``TaskStore``: reads from the local mirror, writes through the
tracker first and into the mirror only once the tracker took them.

The mirror is a board store, shared by every instance of the endpoint on PostgreSQL.
Writes go through ``writes`` (one at a time per task, recorded in the write ledger with
what each sent); the sync commits what it reads through ``mirroring``, which never
applies a snapshot over such a write. Reads never call the tracker; they carry a
``stale`` marker when the last successful sync is older than the bound or the tracker is
failing. ``MirroredReads`` and ``SyncHealth`` serve tower-do's mirror too.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cotal_tasks.core import (
    ContractError,
    ErrorCode,
    Outcome,
    StaleMarker,
    TaskStatus,
    TaskSummary,
)
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import RateLimited, RefusedBeforeSending, TrackerHttpError
from cotal_tasks.providers.hosted.ledger import Ledger
from cotal_tasks.providers.hosted.writes import Writes
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
    StoredTask,
    SyncState,
    Write,
)

log = logging.getLogger(__name__)

ChangeHook = Callable[[int], Awaitable[None]]


class Health(Protocol):
    """What the store reads of a sync's health: one source's (``SyncHealth``), or an
    endpoint's over several (``hosted.sources.SourcesHealth``)."""

    @property
    def last_success_ms(self) -> int | None: ...

    @property
    def failing(self) -> str | None: ...

    def report(self) -> SyncState: ...


class Routes(Protocol):
    """The write paths of an endpoint over several sources, a write routed by its task
    id (``hosted.sources.RoutedWrites``)."""

    def writes_for(self, write: Write) -> Writes: ...

    async def drain(self) -> None: ...


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

    def report(self) -> SyncState:
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


async def every_task(
    mirror: Mirror, statuses: frozenset[TaskStatus] | None = None
) -> AsyncIterator[TaskSummary]:
    """Every task of ``mirror`` (of ``statuses``), read a page of 500 at a time."""
    after: int | None = None
    while True:
        page = await mirror.page(PageQuery(500, after, statuses))
        for task in page.tasks:
            yield task
        if not page.more:
            return
        after = page.last


class MirroredReads:
    """The read half of a store whose tasks live in a local mirror (a board store): every
    read is the mirror's, never the source's. Hosted trackers and tower-do boards share it."""

    mirror: Mirror
    health: Health
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

    async def prune(self, before: int, history_before: int | None = None) -> int:
        return await self.mirror.prune(before, history_before)

    async def change_seq(self) -> int:
        return await self.mirror.change_seq()

    async def history(self, task_id: str, limit: int = 100) -> Sequence[HistoryEntry]:
        return await self.mirror.history(task_id, limit)

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        return await self.mirror.history_page(query)

    async def sync_state(self) -> SyncState | None:
        return self.health.report()

    def mirrored(self, statuses: frozenset[TaskStatus] | None = None) -> AsyncIterator[TaskSummary]:
        """Every mirrored task (of ``statuses``), read a page of 500 at a time."""
        return every_task(self.mirror, statuses)

    async def close(self) -> None:
        await self.mirror.close()


class _NoWrites:
    async def drain(self) -> None:
        return None


_NO_WRITES = _NoWrites()


class HostedStore(MirroredReads):
    """The ``TaskStore`` of one hosted tracker endpoint: the mirror's reads, writes through
    the tracker first (``writes``), and the freshness the sync's health says."""

    def __init__(
        self,
        mirror: Mirror,
        writes: Writes | None,
        health: Health,
        boundary: ItemBoundary,
        *,
        tracker: str,
        stale_after_s: float,
        clock: Callable[[], int],
        hooks: list[ChangeHook],
        ledger: Ledger,
        routes: Routes | None = None,
    ) -> None:
        self.mirror = mirror
        # The first source's (one source: its only one); several: ``routes`` says where
        # each write goes (a discovering endpoint may have no source at a time).
        self._writes = writes
        self.routes = routes
        self.ledger = ledger  # every source's writes keep theirs in this one
        self.health = health
        self.boundary = boundary
        self.tracker = tracker  # its name, in the stale marker's reason
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._on_change = hooks  # the sync's commits tell them (``MirrorSync``)

    # -- reads: the mirror, never the tracker (``MirroredReads``) -------------------------
    async def prune(self, before: int, history_before: int | None = None) -> int:
        await self.ledger.prune(before)
        return await super().prune(before, history_before)

    async def close(self) -> None:
        await (self.routes or self._writes or _NO_WRITES).drain()
        await super().close()

    def degradations(self) -> dict[str, Any]:
        """Items the sync mapped without a refused part, or skipped: counts by reason."""
        return self.boundary.snapshot()

    async def freshness(self) -> StaleMarker | None:
        now = self.clock()
        health = self.health
        name = self.tracker
        if health.failing is not None:
            return StaleMarker(
                staleAsOf=health.last_success_ms or 0,
                reason=f"{name} sync is failing: {health.failing}"[:512],
            )
        if health.last_success_ms is None:
            return StaleMarker(staleAsOf=0, reason=f"the first {name} sync has not finished")
        age_s = (now - health.last_success_ms) / 1000
        if age_s > self.stale_after_s:
            return StaleMarker(
                staleAsOf=health.last_success_ms,
                reason=f"the last successful {name} sync was {age_s:.0f} s ago",
            )
        return None

    # -- writes: the tracker first, then the mirror (see ``writes``) --------------------
    async def commit(self, write: Write) -> Committed:
        return await self.writes_for(write).commit(write)

    def writes_for(self, write: Write) -> Writes:
        return self.writes if self.routes is None else self.routes.writes_for(write)

    @property
    def writes(self) -> Writes:
        """The first source's write path (tools and tests)."""
        assert self._writes is not None, "an endpoint with no source yet writes nothing"
        return self._writes
