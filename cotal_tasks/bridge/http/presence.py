"""The dashboard's liveness column: presence cards, read as a view with its own staleness.

Liveness is derived, never owned by the tasks provider (contract section 3). The view
carries the manager's three-state vocabulary:

- ``current``: the presence bucket was read just now, so a seat without a fresh card
  with its lifecycle uid is offline;
- ``stale``: the latest read failed (the broker is unreachable); the cards shown are the
  last ones read, as of ``observedAt``, and say nothing about now;
- ``unpopulated``: there is no presence to read (no bucket, or no card in the space at
  all), so absence means nothing and no seat is called offline.

A seat's state under a view is ``online`` (a fresh card with the binding's lifecycle
uid), ``offline`` (no such card), ``replaced`` (a fresh card of the same principal with
another lifecycle uid: a new incarnation, which the binding does not follow), or
``unknown`` (the view cannot tell).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

from cotal_tasks.bridge.wire.subjects import stream_names
from cotal_tasks.core import Seat
from cotal_tasks.core.presence import PresenceCard, read_presence_card

log = logging.getLogger(__name__)

View = Literal["current", "stale", "unpopulated"]
SeatState = Literal["online", "offline", "replaced", "unknown"]
READ_TIMEOUT_S = 2.0
REUSE_MS = 1000  # a burst of board reads (one per column) shares one presence read


Card = PresenceCard  # what the liveness column needs of one presence card


@dataclass(frozen=True, slots=True)
class PresenceSnapshot:
    view: View
    observed_at: int | None  # when the cards were read; None when never
    reason: str | None = None
    cards: Mapping[str, Card | None] = field(default_factory=dict)

    def liveness(self, seat: Seat) -> dict[str, Any]:
        """The liveness entry of a bound seat under this view."""
        out: dict[str, Any] = {"view": self.view, "seat": self._seat_state(seat)}
        card = self.cards.get(seat.principal)
        if card is not None and card.lifecycle_uid == seat.lifecycleUid and card.ts is not None:
            out["lastSeen"] = card.ts
        return out

    def _seat_state(self, seat: Seat) -> SeatState:
        if self.view == "unpopulated" or seat.principal not in self.cards:
            return "unknown"
        card = self.cards[seat.principal]
        if card is None or not card.online:
            return "offline"
        return "online" if card.lifecycle_uid == seat.lifecycleUid else "replaced"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"view": self.view}
        if self.observed_at is not None:
            out["observedAt"] = self.observed_at
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class PresenceReader(Protocol):
    async def snapshot(self, principals: Collection[str]) -> PresenceSnapshot: ...


class NoPresenceView:
    """A bridge with no presence source: every view is unpopulated."""

    async def snapshot(self, principals: Collection[str]) -> PresenceSnapshot:
        return PresenceSnapshot("unpopulated", None, "this bridge reads no presence")


class BrokerState(Protocol):
    @property
    def is_connected(self) -> bool: ...


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


parse_card = read_presence_card  # a card as the wire's presence lookup reads it


class KvPresenceView:
    """Presence cards from ``cotal_presence_<space>`` over the bridge's connection."""

    def __init__(
        self,
        js: JetStreamContext,
        space: str,
        broker: BrokerState,
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self._js = js
        self._bucket = stream_names(space)["presence"]
        self._broker = broker
        self._clock = clock
        self._kv: KeyValue | None = None
        self._cards: dict[str, Card | None] = {}
        self._last_ok: int | None = None
        self._empty = False

    async def snapshot(self, principals: Collection[str]) -> PresenceSnapshot:
        now = self._clock()
        wanted = set(principals)
        if not self._broker.is_connected:
            return self._failed("the bridge's broker connection is down")
        if (
            self._last_ok is not None
            and now - self._last_ok < REUSE_MS
            and (self._empty or wanted <= self._cards.keys())
        ):
            return self._current()
        try:
            return await asyncio.wait_for(self._read(wanted, now), READ_TIMEOUT_S)
        except BucketNotFoundError:
            self._kv = None
            return PresenceSnapshot("unpopulated", now, "the space has no presence bucket")
        except (NatsError, TimeoutError) as exc:
            self._kv = None
            log.warning("presence could not be read (%s); the liveness view is stale", exc)
            return self._failed(f"presence could not be read ({type(exc).__name__})")

    async def _read(self, wanted: set[str], now: int) -> PresenceSnapshot:
        if self._kv is None:
            self._kv = await self._js.key_value(self._bucket)
        status = await self._kv.status()
        if status.values == 0:
            self._cards, self._last_ok, self._empty = {}, now, True
            return self._current()
        cards: dict[str, Card | None] = {}
        for principal in sorted(wanted):
            try:
                entry = await self._kv.get(principal)
            except KeyNotFoundError:
                cards[principal] = None
                continue
            cards[principal] = parse_card(principal, entry.value, now)
        self._cards, self._last_ok, self._empty = cards, now, False
        return self._current()

    def _current(self) -> PresenceSnapshot:
        if self._empty:
            return PresenceSnapshot(
                "unpopulated",
                self._last_ok,
                "no seat has a presence card in this space, so absence says nothing",
            )
        return PresenceSnapshot("current", self._last_ok, None, dict(self._cards))

    def _failed(self, reason: str) -> PresenceSnapshot:
        if self._last_ok is None or self._empty:
            return PresenceSnapshot("unpopulated", self._last_ok, reason)
        return PresenceSnapshot("stale", self._last_ok, reason, dict(self._cards))
