"""One poll's walk over GitHub's issue listing, with the evidence read page by page.

For each page: every issue changed since the last poll (not one the overlap reads again)
has its timeline read, and every changed pull request its links (the issues its body,
closing references and latest comments name), in one GraphQL request for the page.
GitHub's ``updated_at`` is whole seconds, so an item stamped with the cursor's own second
may have changed after the last poll read it: it counts as changed unless its content is
what that poll read (``edge``, the fingerprints of the items read at the cursor's second,
kept in the checkpoint), so an edit in the cursor's second gets its evidence read. An
issue a pull request names is read again only when the pull request may be newer than
the issue's read: an issue this walk has already listed is read in the page's own batch,
any other is left to the sync (``ListPage.linked``), which fetches it after the walk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from cotal_tasks.providers.github import evidence, mapping
from cotal_tasks.providers.hosted.boundary import ItemBoundary, as_int, as_ms, as_stamp
from cotal_tasks.providers.hosted.tracker import Evidence, TrackedIssue

Links = Callable[[list[int], list[int]], Awaitable[evidence.Found]]
Statuses = Callable[[list[dict[str, Any]]], Awaitable[dict[int, str]]]
# One issue through the boundary: mapped, or recorded as unmappable (``None``).
Tracked = Callable[[dict[str, Any], Sequence[Evidence], str | None], TrackedIssue | None]


@dataclass
class PageRead:
    issues: list[TrackedIssue]
    linked: set[int]  # issues this walk has not listed, named by a newer pull request
    evidenced: set[int]
    highest: str | None
    reread: int  # how many of ``issues`` (the last) are earlier pages' issues


EDGE = "edge"  # the checkpoint's fingerprints of the items read at the cursor's second
EDGE_MAX = 1_000  # fingerprints kept; an item past them is read again at that second


def fingerprint(item: Mapping[str, Any]) -> str:
    """What a listing item says, as a short digest: equal only for the same content. An
    item holding a lone surrogate (JSON allows its escape, and trackers send it; orjson
    writes none) is digested from the standard library's JSON of it, as deterministic."""
    try:
        data = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = json.dumps(item, sort_keys=True, default=repr).encode()
    return hashlib.blake2b(data, digest_size=12).hexdigest()


@dataclass
class Walk:
    repo: str
    cursor: str | None  # the poll's starting cursor: what is newer changed since
    links: Links
    statuses: Statuses
    tracked: Tracked
    boundary: ItemBoundary
    # The last poll's fingerprints of the items it read at the cursor's second (number
    # as text -> fingerprint); ``edge_now`` this walk's, at its highest second so far.
    edge: Mapping[str, str] = field(default_factory=dict)
    highest: str | None = None
    edge_now: dict[str, str] = field(default_factory=dict)
    read: dict[int, str] = field(default_factory=dict)  # number -> updated_at read
    # number -> the newest updated_at listed when its evidence was read: a pull request
    # changed no later than that was linked already when the timeline was read.
    as_of: dict[int, int] = field(default_factory=dict)
    known: dict[int, TrackedIssue] = field(default_factory=dict)  # issues listed so far

    def __post_init__(self) -> None:
        self.highest = self.cursor
        self.edge_now = dict(self.edge)
        self._cursor_ms = as_ms(self.cursor)

    def _fresh(self, number: int, stamp_ms: int, item: Mapping[str, Any]) -> bool:
        """Whether the item changed since the last poll: newer than its cursor, or of the
        cursor's second with content other than that poll read."""
        if self.cursor is None or stamp_ms > self._cursor_ms:
            return True
        return stamp_ms == self._cursor_ms and self.edge.get(str(number)) != fingerprint(item)

    def _note_edge(self, raw: Sequence[Any], before: str | None) -> None:
        """Keep the fingerprints of the items read at the walk's highest second."""
        if self.highest != before:
            self.edge_now = {}
        top = as_ms(self.highest)
        for item in reversed(raw):  # oldest first: the highest second ends the page
            if not isinstance(item, dict):
                continue
            if as_ms(item.get("updated_at")) != top:
                break
            number = as_int(item.get("number"))
            if number is not None and len(self.edge_now) < EDGE_MAX:
                self.edge_now[str(number)] = fingerprint(item)

    async def page(self, raw: Sequence[Any]) -> PageRead:
        items: list[dict[str, Any]] = []
        changed: list[int] = []
        pulls: dict[int, int] = {}  # changed pull request -> its updated_at (ms)
        mentions: list[tuple[int, int]] = []  # (issue, updated_at of who names it)
        before = self.highest
        for item in raw:
            number = as_int(item.get("number")) if isinstance(item, dict) else None
            if not isinstance(item, dict) or number is None:
                self.boundary.note("item-unmappable", "an item of the issue listing")
                continue
            stamp = as_stamp(item.get("updated_at"))
            if self.read.get(number) == str(stamp):
                continue  # the seam of two pages: read a moment ago
            self.read[number] = str(stamp)
            if stamp and (self.highest is None or as_ms(stamp) > as_ms(self.highest)):
                self.highest = stamp
            fresh = self._fresh(number, as_ms(stamp), item)
            if mapping.is_pull_request(item):
                if fresh:
                    pulls[number] = as_ms(stamp)
                    named_here = mapping.mentioned_issues(self.repo, item)
                    mentions += [(n, as_ms(stamp)) for n in named_here]
            else:
                items.append(dict(item))
                if fresh:
                    changed.append(number)
        self._note_edge(raw, before)
        on_page = {as_int(item.get("number")) or 0 for item in items}
        again = self._uncovered(mentions, on_page) - set(changed)
        found = await self.links(changed + sorted(again), list(pulls))
        named = [(n, pulls.get(p, 0)) for p, issues in found.linked.items() for n in issues]
        more = self._uncovered(named, on_page) - set(changed) - again
        if more:  # named only in closing references or comments: a second batch
            extra = await self.links(sorted(more), [])
            found.evidence.update(extra.evidence)
            again |= more
        statuses = await self.statuses(items)
        highest = as_ms(self.highest)
        issues = []
        for item in items:
            number = as_int(item.get("number")) or 0
            issue = self.tracked(item, found.evidence.get(number, ()), statuses.get(number))
            if issue is None:
                continue  # recorded by the boundary
            self.known[number] = replace(issue, evidence=())
            issues.append(issue)
        for number in sorted(again - on_page):
            held = self.known.get(number)
            if held is None:
                continue  # on this page, but it did not map
            issue = replace(held, evidence=tuple(found.evidence.get(number, ())))
            issues.append(issue)
        for number in {*changed, *again}:
            self.as_of[number] = highest
        # What the walk has not listed is fetched after it (the sync's refresh).
        linked = {n for n, _ in [*mentions, *named] if n not in self.known}
        reread = len(again - on_page)
        return PageRead(issues, linked, {*changed, *again}, self.highest, reread)

    def _uncovered(self, mentions: list[tuple[int, int]], on_page: set[int]) -> set[int]:
        """Issues named by a pull request that may be newer than their evidence read
        (timestamps are whole seconds: the same second may be later), that this walk has
        listed (so their issue is at hand): on this page or an earlier one."""
        return {
            n
            for n, at in mentions
            if (n in self.known or n in on_page) and at >= self.as_of.get(n, -1)
        }
