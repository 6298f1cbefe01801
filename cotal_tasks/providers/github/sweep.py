"""The rotating reference sweep (``reference_sweep``). Pure: builds the query, reads the
answer and moves the sweep's state; no I/O.

A pull request of another repository that references an issue makes only a
``cross-referenced`` event on the issue's timeline: no listing, no issue event and no
``updated_at`` shows it. Each poll, one GraphQL request reads the next page of up to
``PAGE`` open issues (oldest first) with the number of links on each timeline (the
``totalCount`` of its cross-references, Development links and commit references). An issue
whose count moved since the sweep last saw it is read again with its evidence. The page
cursor wraps to the first page after the last, so every open issue is looked at once per
ceil(open issues / ``PAGE``) polls.

The first full lap only records counts (an import, or the mirror's earlier polls, read the
timelines already). After it, an issue new to the sweep (opened or reopened since its last
lap) is read when its count is not zero. At the end of each lap, the counts of issues the lap
did not see (closed, transferred, deleted) are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_int, at_path

SWEEP = "sweep"  # the checkpoint's entry: the sweep's state (``SweepState.dump``)
PAGE = 100  # open issues per request: GitHub's connection maximum
ITEM_TYPES = "[CROSS_REFERENCED_EVENT, CONNECTED_EVENT, REFERENCED_EVENT]"

QUERY = f"""
query($owner: String!, $name: String!, $after: String) {{
  repository(owner: $owner, name: $name) {{
    issues(
      states: [OPEN], first: {PAGE}, after: $after,
      orderBy: {{field: CREATED_AT, direction: ASC}}
    ) {{
      pageInfo {{ hasNextPage endCursor }}
      nodes {{ number timelineItems(itemTypes: {ITEM_TYPES}) {{ totalCount }} }}
    }}
  }}
}}
"""


@dataclass
class SweepState:
    """Where the sweep is: the cursor of the next page (``None``: the first), how many
    laps it completed, and each open issue's count with the lap that last saw it."""

    after: str | None = None
    lap: int = 0
    counts: dict[int, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, raw: Any) -> SweepState:
        """The state a checkpoint holds; an entry of another shape starts afresh."""
        if not isinstance(raw, Mapping):
            return cls()
        after = raw.get("after")
        lap = as_int(raw.get("lap")) or 0
        counts: dict[int, tuple[int, int]] = {}
        held = raw.get("counts")
        for key, value in held.items() if isinstance(held, Mapping) else ():
            number = as_int(key)
            if number is None or not isinstance(value, list) or len(value) != 2:
                continue
            count, seen = as_int(value[0]), as_int(value[1])
            if count is not None and seen is not None:
                counts[number] = (count, seen)
        return cls(after if isinstance(after, str) else None, lap, counts)

    def dump(self) -> dict[str, Any]:
        counts = {str(n): [count, seen] for n, (count, seen) in sorted(self.counts.items())}
        return {"after": self.after, "lap": self.lap, "counts": counts}


@dataclass(frozen=True, slots=True)
class SweepPage:
    counts: dict[int, int]  # issue number -> links on its timeline
    end_cursor: str | None
    has_next: bool
    odd: int = 0  # nodes of another shape, left out


def read(data: Any) -> SweepPage:
    """What one answer says. An answer without the connection raises ``ValueError`` (the
    boundary counts it); a node of another shape is left out and counted in ``odd``."""
    connection = at_path(data, "repository", "issues")
    page = at_path(connection, "pageInfo")
    nodes = at_path(connection, "nodes")
    if not isinstance(page, Mapping) or not isinstance(nodes, list):
        raise ValueError("the answer holds no page of open issues")
    counts: dict[int, int] = {}
    odd = 0
    for node in nodes:
        number = as_int(at_path(node, "number"))
        count = as_int(at_path(node, "timelineItems", "totalCount"))
        if number is None or count is None:
            odd += 1
            continue
        counts[number] = count
    end = page.get("endCursor")
    return SweepPage(
        counts, end if isinstance(end, str) else None, page.get("hasNextPage") is True, odd
    )


def advance(state: SweepState, page: SweepPage) -> tuple[SweepState, list[int]]:
    """The state after ``page``, and the issues to read again: those whose count moved,
    and (after the first lap) those new to the sweep that have any link."""
    counts = dict(state.counts)
    read_again: list[int] = []
    for number, count in sorted(page.counts.items()):
        held = counts.get(number)
        if held is None:
            if state.lap > 0 and count > 0:
                read_again.append(number)
        elif held[0] != count:
            read_again.append(number)
        counts[number] = (count, state.lap)
    if page.has_next and page.end_cursor is not None:
        return SweepState(page.end_cursor, state.lap, counts), read_again
    # The last page: the lap is complete. Issues it did not see have left the open ones
    # (unless an odd node of this page may have been one of them).
    kept = {n: held for n, held in counts.items() if held[1] == state.lap or page.odd}
    return SweepState(None, state.lap + 1, kept), read_again
