"""When a poll reads the repository's issue events feed (``events``).

The feed finds what no listing shows: a commit that references an issue without changing
it, and (with a scope) an issue a label or milestone event took out of the scoped
listing. Asked every poll it doubles the cost of an unchanged one (two conditional
requests a repository instead of the listing's one), so it is read on its own cadence:

- at the poll's own time when something says the repository moved: the listing answered
  other than 304 in this poll, or a webhook delivery (a ``push``, ``issues`` or
  ``pull_request``) named the repository since the feed was last read (the sync hands
  the latest one's mark over as ``remembered[MOVED]``);
- otherwise once every ``reference_events_interval_s``, so a reference that comes with
  no webhook and no other change is found within that interval and one poll;
- never sooner after a read than the ``X-Poll-Interval`` the feed's answer asked for
  (GitHub sends it on its events endpoints; at most ``MAX_WAIT_S`` is honoured): a read
  asked before then is owed, and made by the first poll it allows;
- whatever the above say, in a poll to the tracker's present (the CLI's ``sync``, which
  promises one): a commit referenced a moment ago is found at once. The read is kept in
  the marks like any other, so the cadence counts from it.

The state is kept in the checkpoint's feed marks (text, beside the last event seen and
the feed's ETag), so a restart or another leader keeps the cadence. Times are the
tracker client's clock, epoch seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

READ_AT = "issue_events_read_at"  # when the feed was last asked
WAIT = "issue_events_wait_s"  # the X-Poll-Interval of that answer
OWED = "issue_events_owed"  # a read asked while X-Poll-Interval held it off
MOVED_SEEN = "issue_events_moved"  # the last webhook mark a read answered
MAX_WAIT_S = 3600.0  # a longer X-Poll-Interval is taken as this


def wait_of(header: str | None) -> float:
    """The seconds an ``X-Poll-Interval`` header asks to wait (0: none, or unreadable)."""
    try:
        seconds = float(header) if header else 0.0
    except ValueError:
        return 0.0
    return min(MAX_WAIT_S, seconds) if seconds > 0 else 0.0


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class FeedClock:
    """Where the feed's cadence stands, read from the checkpoint's marks."""

    read_at: float | None = None  # never read (or by a version without the cadence)
    wait_s: float = 0.0
    owed: bool = False
    moved_seen: str | None = None

    @classmethod
    def load(cls, marks: Mapping[str, str]) -> FeedClock:
        return cls(
            _number(marks.get(READ_AT)),
            min(MAX_WAIT_S, max(0.0, _number(marks.get(WAIT)) or 0.0)),
            marks.get(OWED) == "1",
            marks.get(MOVED_SEEN),
        )

    def asked(self, changed: bool, moved: str | None) -> bool:
        """Whether something says the repository moved since the last read: the listing
        (``changed``), a webhook's mark not answered yet, or a read owed."""
        return changed or self.owed or (moved is not None and moved != self.moved_seen)

    def due(self, now: float, interval_s: float, asked: bool) -> bool:
        """Whether this poll reads the feed. A clock that went back (another instance's,
        or a correction) reads it, and starts the cadence over."""
        if self.read_at is None or now < self.read_at:
            return True
        since = now - self.read_at
        return since >= max(interval_s, self.wait_s) or (asked and since >= self.wait_s)

    def held(self, moved: str | None) -> dict[str, str]:
        """The marks of a read asked but held off by ``X-Poll-Interval``: owed."""
        return {OWED: "1", **({MOVED_SEEN: moved} if moved is not None else {})}

    def read(self, now: float, wait_s: float, moved: str | None) -> dict[str, str]:
        """The marks after a read at ``now`` whose answer asked ``wait_s``."""
        marks = {READ_AT: f"{now:.3f}", WAIT: f"{wait_s:g}", OWED: "0"}
        if moved is not None:
            marks[MOVED_SEEN] = moved
        return marks
