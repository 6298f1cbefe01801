"""The issues webhooks asked to refresh, waiting for the sync loop: deduplicated, and let
out at a bounded rate per endpoint.

A webhook only wakes the sync (polling is the source of truth), so nothing here may cost
the tracker more than the operator allows: the issues wait in a set (a second delivery
naming the same issue adds nothing), and ``take`` lets out at most
``webhook_refreshes_per_minute`` a minute (a bucket holding a minute's worth, so a quiet
endpoint refreshes a burst at once). When more wait than an hour's worth, or a delivery
asks for a poll (it named too many issues, or another instance's wake carried none), the
waiting set is dropped for one poll, which reads whatever changed; such polls are let out
at the same rate. The regular poll is the sync loop's own and never waits for these.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass
class RefreshQueue:
    per_minute: float
    clock_s: Callable[[], float] = time.monotonic
    pending: set[int] = field(default_factory=set)
    poll_wanted: bool = False
    dropped: int = 0  # issues given up for a poll (too many waiting), since the start
    _tokens: float = field(init=False)
    _at: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = self.capacity
        self._at = self.clock_s()

    @property
    def capacity(self) -> float:
        return max(1.0, self.per_minute)

    @property
    def most_pending(self) -> int:
        return max(1, int(self.per_minute * 60))

    def add(self, numbers: Iterable[int]) -> None:
        """Wait to refresh ``numbers`` (none: a poll is wanted)."""
        named = set(numbers)
        if not named:
            self.poll_wanted = True
        self.pending |= named
        if len(self.pending) > self.most_pending:
            self.dropped += len(self.pending)
            self.pending.clear()
            self.poll_wanted = True

    def _refill(self) -> None:
        now = self.clock_s()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.per_minute / 60)
        self._at = now

    def take(self) -> set[int]:
        """The issues to refresh now: as many as the rate lets out, lowest first."""
        self._refill()
        count = min(len(self.pending), int(self._tokens))
        taken = set(sorted(self.pending)[:count])
        self.pending -= taken
        self._tokens -= count
        return taken

    def take_poll(self) -> bool:
        """Whether a wanted poll may run now (it then costs one refresh's worth)."""
        if not self.poll_wanted:
            return False
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        self.poll_wanted = False
        return True

    def clear_poll(self) -> None:
        """A poll ran anyway (the regular one): a wanted poll is served."""
        self.poll_wanted = False

    @property
    def waiting(self) -> bool:
        return bool(self.pending) or self.poll_wanted

    def ready_in_s(self) -> float:
        """Seconds until ``take`` or ``take_poll`` lets something out (0: now)."""
        if not self.waiting:
            return float("inf")
        self._refill()
        if self._tokens >= 1:
            return 0.0
        return (1 - self._tokens) * 60 / self.per_minute
