"""One poller per hosted endpoint: the instances on one PostgreSQL mirror elect a sync leader.

The leader holds the lease ``sync:<checkpoint>`` in the mirror (``ct_leases``) and runs
the sync loop; it renews the lease every third of its lifetime (1.5 poll intervals) and
publishes its sync health beside it. The others are followers: they serve reads from the
shared mirror and still write back (any instance writes to the tracker), copy the
leader's sync health so their ``stale`` marker tells the truth, announce the changes the
leader's sync commits (``board-changed``), and try for the lease every half interval. A
dead leader's lease expires, so another instance takes over within two poll intervals and
resumes from the checkpoint. While it leads, the leader listens on the mirror for the
webhook wakes the other instances received (``hosted.wakes``), so a delivery to any
instance reaches the running sync within a moment. A mirror on SQLite serves one
instance, which always leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from cotal_tasks.core import ContractError
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.hosted.ledger import Leases
from cotal_tasks.providers.hosted.mirroring import MirrorSync
from cotal_tasks.providers.hosted.store import SyncHealth
from cotal_tasks.providers.hosted.sync import SyncEngine
from cotal_tasks.providers.hosted.wakes import Listener

log = logging.getLogger(__name__)

Role = Literal["leader", "follower"]


@dataclass
class Election:
    """Leader election and the sync loop of one hosted endpoint, handed its parts: the
    sync loop it runs while leading, the mirror whose changes it announces while
    following, the checkpoints table (the lease's name and the published health sit
    beside the checkpoint) and the health it publishes or copies."""

    sync: SyncEngine
    mirror: MirrorSync
    checkpoints: Checkpoints
    health: SyncHealth
    interval_s: float
    clock: Callable[[], int]
    holder: str
    role: Role = "follower"
    since_ms: int | None = None  # when this instance took its current role
    listener: Listener | None = None  # the webhook wakes of the other instances, leading

    @property
    def lease(self) -> str:
        return f"sync:{self.sync.key}"

    @property
    def health_key(self) -> str:
        return f"health:{self.sync.key}"

    @property
    def ttl_ms(self) -> int:
        return max(300, int(self.interval_s * 1500))

    def _become(self, role: Role) -> None:
        if role != self.role or self.since_ms is None:
            log.info("%s: this instance is now the sync %s", self.sync.key, role)
            self.role, self.since_ms = role, self.clock()

    async def run(self, stop: asyncio.Event) -> None:
        """Lead or follow until ``stop`` is set; a clean stop hands the lease on."""
        if not self.checkpoints.shared:
            self._become("leader")  # SQLite: one instance, the sole-writer lock says so
            await self.sync.run(self.interval_s, stop)
            return
        leases = Leases(self.checkpoints.engine)
        seen = await self._seq()
        try:
            while not stop.is_set():
                if await self._take(leases):
                    self._become("leader")
                    await self._lead(leases, stop)
                    seen = await self._seq()
                    continue
                self._become("follower")
                seen = await self._follow(seen)
                await _sleep_or(stop, self.interval_s / 2)
        finally:
            if self.role == "leader" and stop.is_set():  # a clean stop: hand over at once
                with contextlib.suppress(ContractError):
                    await leases.release(self.lease, self.holder)

    async def _take(self, leases: Leases) -> bool:
        try:
            return await leases.acquire(self.lease, self.holder, self.clock(), self.ttl_ms)
        except ContractError as exc:
            log.warning("%s: the sync lease cannot be read (%s)", self.sync.key, exc.message)
            return False

    async def _lead(self, leases: Leases, stop: asyncio.Event) -> None:
        """Run the sync loop while the lease is ours; stop it as soon as it is not."""
        halt = asyncio.Event()
        loop = asyncio.create_task(self.sync.run(self.interval_s, halt))
        self.listener = Listener(self.checkpoints, self.sync.key, self.holder, self.sync.wake)
        try:
            while not stop.is_set() and not loop.done():
                await self.listener.ensure()  # and again each turn, should it break
                await self._publish_health()
                await _sleep_or(stop, self.ttl_ms / 3000)
                if not stop.is_set() and not await self._take(leases):
                    log.warning("%s: the sync lease was lost; following", self.sync.key)
                    self._become("follower")
                    break
        finally:
            halt.set()
            await loop
            await self.listener.close()

    async def _publish_health(self) -> None:
        health = self.health
        snapshot = {
            "lastSuccessMs": health.last_success_ms,
            "failing": health.failing,
            "failingSinceMs": health.failing_since_ms,
            "refused": health.refused,
        }
        with contextlib.suppress(ContractError):
            await self.checkpoints.save(self.health_key, snapshot, self.clock())

    async def _follow(self, seen: int) -> int:
        """Take the leader's sync health, and announce what its sync committed."""
        with contextlib.suppress(ContractError):
            snapshot = await self.checkpoints.load(self.health_key) or {}
            health = self.health
            health.last_success_ms = snapshot.get("lastSuccessMs")
            health.failing = snapshot.get("failing")
            health.failing_since_ms = snapshot.get("failingSinceMs")
            health.refused = bool(snapshot.get("refused"))
        seq = await self._seq()
        if seq > seen:
            await self.mirror.announce_change(seq)
        return max(seq, seen)

    async def _seq(self) -> int:
        try:
            return await self.mirror.change_seq()
        except ContractError:
            return 0


async def _sleep_or(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
