"""The webhook deliveries a route refused as unauthenticated (401: no endpoint's secret
verifies them), kept where an operator looks: a log line, ``/healthz`` and the
dashboard's sync panel.

A wrong secret on the tracker's side, or a stranger posting to the route, is otherwise
silent: the sender sees its 401, the bridge's operator nothing. The log line names the
route, the sender's address and the reason, never the body or a secret; a flood writes
at most one line per ``LOG_EVERY_S`` seconds, which counts the refusals since the last.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

LOG_EVERY_S = 60.0
MAX_REASON_CHARS = 300  # the route's own messages are shorter; this bounds the record


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class RefusedDeliveries:
    """One route's unauthenticated deliveries since the bridge started: how many, the
    latest (when, and why), and the rate-limited log line."""

    route: str
    clock: Callable[[], float] = time.monotonic
    wall_ms: Callable[[], int] = _wall_ms
    count: int = 0
    last_ms: int | None = None
    last_reason: str | None = None
    _logged_at: float | None = field(default=None, repr=False)
    _unlogged: int = field(default=0, repr=False)

    def refused(self, sender: str | None, reason: str) -> None:
        """Record one refusal from ``sender`` (an address) for ``reason``."""
        self.count += 1
        self.last_ms = self.wall_ms()
        self.last_reason = reason[:MAX_REASON_CHARS]
        now = self.clock()
        if self._logged_at is not None and now - self._logged_at < LOG_EVERY_S:
            self._unlogged += 1
            return
        since = f"; {self._unlogged} more refused since the last line" if self._unlogged else ""
        log.warning(
            "%s webhook: refused a delivery from %s (401, %d since start%s): %s",
            self.route,
            sender or "an unknown sender",
            self.count,
            since,
            self.last_reason,
        )
        self._logged_at, self._unlogged = now, 0

    def to_json(self) -> dict[str, Any]:
        """What ``/healthz`` shows: the count, and the latest refusal when there was one."""
        shown: dict[str, Any] = {"refused": self.count}
        if self.last_ms is not None:
            shown |= {"lastRefusedAt": self.last_ms, "lastRefusal": self.last_reason}
        return shown
