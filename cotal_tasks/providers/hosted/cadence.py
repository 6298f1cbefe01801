"""When a poll reads a listing kept on a cadence of its own beside the issue listing:
GitHub's issue events feed (``github.cadence``), GitLab's merge requests.

Such a listing finds what the issue listing does not show (a commit that references an
issue without changing it; a merge request's change that moves no issue), so it is never
left unread for long; asked every poll, it would cost an unchanged poll one request more
per source. A poll reads it:

- when something says the source moved: the issue listing changed in this poll, or a
  webhook delivery said so since the last read (its mark, ``remembered[MOVED]``, handed
  over by the sync);
- otherwise once every interval, so what comes with no webhook and no other change is
  found within that interval and one poll;
- never sooner after a read than the wait its answer asked for (GitHub's
  ``X-Poll-Interval``; at most ``MAX_WAIT_S`` is honoured): a read asked before then is
  owed, and made by the first poll it allows;
- whatever the above say, in a poll to the tracker's present (the CLI's ``sync``, which
  promises one). The read is kept in the marks like any other, so the cadence counts
  from it.

The state is kept in the checkpoint's marks (text, under the listing's own prefix), so a
restart or another leader keeps the cadence. Times are the tracker client's clock, epoch
seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_WAIT_S = 3600.0  # a longer wait asked by the tracker is taken as this


@dataclass(frozen=True, slots=True)
class Keys:
    """The names of one listing's marks, under its ``prefix``."""

    prefix: str

    @property
    def read_at(self) -> str:  # when the listing was last asked
        return f"{self.prefix}_read_at"

    @property
    def wait(self) -> str:  # the wait that answer asked for
        return f"{self.prefix}_wait_s"

    @property
    def owed(self) -> str:  # a read asked while that wait held it off
        return f"{self.prefix}_owed"

    @property
    def moved(self) -> str:  # the last webhook mark a read answered
        return f"{self.prefix}_moved"


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class FeedClock:
    """Where one listing's cadence stands, read from the checkpoint's marks."""

    keys: Keys
    read_at: float | None = None  # never read (or by a version without the cadence)
    wait_s: float = 0.0
    owed: bool = False
    moved_seen: str | None = None

    @classmethod
    def load(cls, keys: Keys, marks: Mapping[str, str]) -> FeedClock:
        return cls(
            keys,
            _number(marks.get(keys.read_at)),
            min(MAX_WAIT_S, max(0.0, _number(marks.get(keys.wait)) or 0.0)),
            marks.get(keys.owed) == "1",
            marks.get(keys.moved),
        )

    def asked(self, changed: bool, moved: str | None) -> bool:
        """Whether something says the source moved since the last read: the issue
        listing (``changed``), a webhook's mark not answered yet, or a read owed."""
        return changed or self.owed or (moved is not None and moved != self.moved_seen)

    def due(self, now: float, interval_s: float, asked: bool) -> bool:
        """Whether this poll reads the listing. A clock that went back (another
        instance's, or a correction) reads it, and starts the cadence over."""
        if self.read_at is None or now < self.read_at:
            return True
        since = now - self.read_at
        return since >= max(interval_s, self.wait_s) or (asked and since >= self.wait_s)

    def held(self, moved: str | None) -> dict[str, str]:
        """The marks of a read asked but held off by the wait: owed."""
        keys = self.keys
        return {keys.owed: "1", **({keys.moved: moved} if moved is not None else {})}

    def read(self, now: float, wait_s: float, moved: str | None) -> dict[str, str]:
        """The marks after a read at ``now`` whose answer asked ``wait_s``."""
        keys = self.keys
        marks = {keys.read_at: f"{now:.3f}", keys.wait: f"{wait_s:g}", keys.owed: "0"}
        if moved is not None:
            marks[keys.moved] = moved
        return marks
