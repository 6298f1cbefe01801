"""``board-changed`` from one endpoint instance: a wake, never a feed (the contract,
section 5).

Changes committed together (one group commit's batch, answered in one turn of the event
loop) wake readers once, with the newest ``changeSeq``, published on the next turn. A
write is answered without waiting for it, and a wake that cannot be sent never undoes
the write it announces.
"""

from __future__ import annotations

import asyncio
import logging

import orjson
from nats.aio.client import Client as NATS

from cotal_tasks.core import BOARD_CHANGED_TOPIC

log = logging.getLogger(__name__)


class Wakes:
    """The ``board-changed`` events of one instance, on its event ``subject``."""

    def __init__(self, nc: NATS, subject: str) -> None:
        self.nc = nc
        self.subject = subject
        # The newest change not yet announced (changeSeq, observedAt), and its publisher.
        self._due: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    def changed(self, change_seq: int, observed_at: int) -> None:
        """Announce ``change_seq`` with the other changes of this turn, on the next one."""
        due = self._due
        self._due = (change_seq if due is None else max(change_seq, due[0]), observed_at)
        if due is None:
            self._task = asyncio.create_task(self._publish_due())

    async def settled(self) -> None:
        """Wait until the wake of the last changes went out (or failed to)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _publish_due(self) -> None:
        due, self._due = self._due, None
        if due is None:
            return
        change_seq, observed_at = due
        event = {
            "v": 1,
            "topic": BOARD_CHANGED_TOPIC,
            "ts": observed_at,
            "data": {"changeSeq": change_seq, "observedAt": observed_at},
        }
        try:
            await self.nc.publish(self.subject, orjson.dumps(event))
        except Exception:  # a wake that cannot be sent must never undo a committed write
            log.exception("board-changed for changeSeq %d was not published", change_seq)
