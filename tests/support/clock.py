"""The one hand-moved clock of the tests: the service's ``clock`` (called, it answers epoch
milliseconds) and the fake trackers' notion of now. Tests move it by hand; nothing sleeps.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

TimeLike = int | float | str | datetime  # numbers are epoch seconds


def parse_iso(value: str) -> int:
    """An ISO 8601 timestamp (``Z``, an offset, or none: UTC; a bare date is midnight) as
    epoch milliseconds. Raises ``ValueError`` when it is not one."""
    text = value.strip()
    if not text or not text[0].isdigit():
        raise ValueError(f"not an ISO 8601 time: {value!r}")
    parsed = datetime.fromisoformat(text.replace("z", "Z").replace(" ", "T", 1))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


def to_ms(value: TimeLike) -> int:
    """Epoch milliseconds from epoch seconds, an ISO string or a datetime."""
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, str):
        return parse_iso(value)
    return round(value * 1000)


class FakeClock:
    """Now, in epoch milliseconds, moved by hand.

    It starts at the real time (so a fake tracker's rate-limit reset compares sensibly
    with a wall clock) unless given a start. Called, it answers epoch milliseconds, as
    the service's clock does."""

    def __init__(self, start: TimeLike | None = None) -> None:
        self.ms = round(time.time() * 1000) if start is None else to_ms(start)

    def __call__(self) -> int:
        return self.ms

    def advance(self, seconds: float = 1) -> int:
        """Move on by ``seconds`` (fractions allowed); returns the new epoch ms."""
        self.ms += round(seconds * 1000)
        return self.ms

    def advance_ms(self, ms: int = 1) -> int:
        self.ms += ms
        return self.ms

    def set(self, when: TimeLike) -> None:
        self.ms = to_ms(when)

    @property
    def seconds(self) -> int:
        """Whole epoch seconds (floored), as second-resolution timestamps and rate-limit
        headers use."""
        return self.ms // 1000

    def time(self) -> float:
        """For code that takes a ``clock_s`` callable."""
        return self.ms / 1000
