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

from cotal_tasks.providers.hosted.cadence import MAX_WAIT_S, FeedClock, Keys

ISSUE_EVENTS = Keys("issue_events")  # the feed's marks: issue_events_read_at, ...

__all__ = ["ISSUE_EVENTS", "MAX_WAIT_S", "FeedClock", "clock", "wait_of"]


def clock(marks: Mapping[str, str]) -> FeedClock:
    """The feed's cadence, as the checkpoint's marks say it stands."""
    return FeedClock.load(ISSUE_EVENTS, marks)


def wait_of(header: str | None) -> float:
    """The seconds an ``X-Poll-Interval`` header asks to wait (0: none, or unreadable)."""
    try:
        seconds = float(header) if header else 0.0
    except ValueError:
        return 0.0
    return min(MAX_WAIT_S, seconds) if seconds > 0 else 0.0
