"""``check-config --preview`` of a hosted endpoint: the most recently updated issues of
each source mapped to tasks, those the scope leaves out shown with why; nothing written."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from cotal_tasks.core import Task
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.mapping import project
from cotal_tasks.providers.hosted.scope import left_out
from cotal_tasks.providers.hosted.tracker import Tracker


async def preview(
    tracker: Tracker,
    cfg: HostedConfig,
    http: TrackerHttp,
    paths: Sequence[str],
    *,
    space: str,
    count: int,
) -> list[tuple[int, Task]]:
    """Map the ``count`` most recently updated issues of each source of ``paths`` (those
    configured, or those discovery lists; evidence included);
    write nothing. An issue the scope leaves out is shown with why, as the statusSource
    ``out of scope: …`` of a dropped task (it would not be taken; the horizon is read
    from the wall clock). Closes ``http``."""
    now_ms = int(time.time() * 1000)
    try:
        shown: list[tuple[int, Task]] = []
        for path in paths:
            source = tracker if path == tracker.path else tracker.sibling(path)
            shown += await _preview_source(source, cfg, space=space, count=count, now_ms=now_ms)
        return shown
    finally:
        await http.client.aclose()


async def _preview_source(
    tracker: Tracker, cfg: HostedConfig, *, space: str, count: int, now_ms: int
) -> list[tuple[int, Task]]:
    shown: list[tuple[int, Task]] = []
    for number in [issue.number for issue in await tracker.recent(count)]:
        issue = await tracker.fetch(number)
        if issue is None:
            continue
        if issue.gone is None:
            why = left_out(cfg.scope, issue, cfg.seats, now_ms, cfg.outside_natively)
            issue = replace(issue, out_of_scope=why)
        task = project(
            issue,
            space=space,
            rules=cfg.status_rules,
            seats=cfg.seats,
            existing=None,
            uid_of=lambda owner, actor: None,
            now=issue.updated_at,
        )
        shown.append((number, task))
    return shown
