"""The one cursor follower: read a listing page by page to its end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

Json = dict[str, Any]


async def follow_cursor(
    fetch: Callable[[Json], Awaitable[Json]], args: Mapping[str, Any]
) -> list[Json]:
    """Fetch the first page with ``args``, then each next one with ``args`` and the last
    page's ``nextCursor``, to the page without one; return every page."""
    pages: list[Json] = []
    cursor: str | None = None
    while True:
        page = await fetch(dict(args) if cursor is None else {**args, "cursor": cursor})
        pages.append(page)
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


def task_ids(pages: Sequence[Json]) -> list[str]:
    return [task["taskId"] for page in pages for task in page["tasks"]]


def tasks_of(pages: Sequence[Json]) -> list[Json]:
    return [task for page in pages for task in page["tasks"]]
