"""What keeps a walk over an ``updated_at``-ascending listing from losing an issue.

A listing paged by position loses issues when they change during the walk: an issue
edited after its page was read moves to the end, and every later issue shifts back a
place, onto the page already read. So a walk asks each next page from the last
``updated_at`` read (``since``, ``updated_after``), and follows a page number only
through a run of issues that share one timestamp, which a timestamp cannot step past.
``Steps`` watches such runs: should an issue read there come again with a newer
``updated_at``, the run may have shifted, and the walk reads from that timestamp once
more before it ends.

``PageCap`` bounds one walk, whatever its pagination (a ``Link`` URL, a page number, a
token, a restart from a timestamp): each request of the walk is a page, and the page
past ``max_pages`` is refused before it is asked, so a tracker (or a proxy) that names a
next page forever ends the poll with an error, the cursor at the last page read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_int, as_stamp
from cotal_tasks.providers.hosted.http import TrackerHttp, too_many_pages

MAX_RESTARTS = 3  # walks again from a disturbed timestamp at most this often


class Steps:
    def __init__(self, key: str) -> None:
        self.key = key  # the item's number field: "number" (GitHub), "iid" (GitLab)
        self.stepped: dict[int, str] = {}  # read while stepping, with its updated_at
        self.disturbed: str | None = None
        self.stepping = False
        self.restarts = 0

    def page(self, items: Sequence[Mapping[str, Any]], since: str | None) -> str | None:
        """Note a page read; the ``updated_at`` of its last item. After it, ``stepping``
        says whether the next page must be asked by page number (one timestamp)."""
        for item in items:
            at = self.stepped.get(as_int(item.get(self.key)) or 0)
            if at is not None and item.get("updated_at") != at:
                self.disturbed = min(self.disturbed or at, at)
        # The last timestamp that reads as one: an item with another shape cannot stop
        # the walk.
        last = next((s for i in reversed(items) if (s := as_stamp(i.get("updated_at")))), None)
        tied = last is not None and last == since
        if self.stepping or tied:
            self.stepped |= {as_int(i.get(self.key)) or 0: str(i.get("updated_at")) for i in items}
        self.stepping = tied
        return str(last) if last is not None else None

    def restart(self) -> str | None:
        """At the end of the walk: the timestamp to read from once more, if any."""
        if self.disturbed is None or self.restarts >= MAX_RESTARTS:
            return None
        since, self.disturbed = self.disturbed, None
        self.restarts += 1
        self.stepped.clear()
        self.stepping = False
        return since


class PageCap:
    """The pages one walk of a listing has asked, at most ``http.max_pages``."""

    def __init__(self, http: TrackerHttp) -> None:
        self.limit = http.max_pages
        self.asked = 0

    def take(self, path: str, method: str = "GET") -> None:
        """Count the page about to be asked for ``path``; past the cap, refuse it."""
        if self.asked >= self.limit:
            raise too_many_pages(self.limit, method=method, path=path)
        self.asked += 1


EDGE_MAX = 5_000  # entries kept at a window's edge (``at_edge``)


def at_edge(seen: Mapping[str, int], since: int) -> dict[str, int]:
    """Of the items read by key with their update stamp (epoch ms), those the next poll's
    window (from ``since``) can bring again, the newest ``EDGE_MAX``: a poll that asks
    from before its cursor drops what it has read already with the same stamp."""
    kept = {k: v for k, v in seen.items() if v >= since}
    if len(kept) > EDGE_MAX:
        kept = dict(sorted(kept.items(), key=lambda kv: kv[1])[-EDGE_MAX:])
    return kept
