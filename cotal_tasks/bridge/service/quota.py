"""Per-seat bounds on writes: how often a seat may write, and what one write may add.

A seat holding ``tasks.self`` may write its own task as often as it likes, and every write
lands in the store (a history row with its note, an idempotency result): one seat sending
note-only ``update-task`` calls in a loop grew a board by megabytes a second. So each seat's
own writes (``claim-task`` and ``update-task``, the commands at mode ``self``; an operator's
credential is trusted with bulk work) are bounded: each seat (its principal, ``owner.actor``,
whatever its lifecycle uid) has a bucket of
``writes_per_minute`` writes that refills at that rate, and a write's note may be at most
``note_max_bytes``. Past either the write is refused ``resource-exhausted`` with
``not-executed``, in a message naming the bound and the wait, and nothing is written.

The buckets live in the process (one instance's view): several instances of one endpoint
each allow the rate, which bounds the total by the instance count. At most
``SEATS_TRACKED`` seats are followed; the one written longest ago is forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from cotal_tasks.core import ContractError, ErrorCode

SEATS_TRACKED = 10_000
_MINUTE_MS = 60_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: int  # epoch ms of the last refill


@dataclass
class SeatQuota:
    """``writes_per_minute`` per seat (0: no bound) and ``note_max_bytes`` per write."""

    writes_per_minute: int
    note_max_bytes: int
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    def admit(self, seat: str, note: str | None, now: int) -> None:
        """Take one write of ``seat`` at ``now`` (epoch ms), or refuse it."""
        if note is not None and len(note.encode()) > self.note_max_bytes:
            raise ContractError(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"the note is {len(note.encode())} bytes, over this endpoint's bound of "
                f"{self.note_max_bytes} bytes a write (note_max_bytes). Shorten it, or "
                "split it over several writes",
                outcome="not-executed",
            )
        rate = self.writes_per_minute
        if rate <= 0:
            return
        bucket = self._buckets.pop(seat, None)
        if bucket is None:
            bucket = _Bucket(float(rate), now)
            while len(self._buckets) >= SEATS_TRACKED:
                self._buckets.popitem(last=False)
        else:
            refill = max(0, now - bucket.at) * rate / _MINUTE_MS
            bucket.tokens = min(float(rate), bucket.tokens + refill)
            bucket.at = now
        self._buckets[seat] = bucket  # the newest at the end
        if bucket.tokens < 1:
            wait_s = (1 - bucket.tokens) * _MINUTE_MS / rate / 1000
            raise ContractError(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"seat {seat} has used its {rate} writes a minute (writes_per_minute_per_seat); "
                f"nothing was written. Send it again in {wait_s:.1f} s",
                outcome="not-executed",
            )
        bucket.tokens -= 1
