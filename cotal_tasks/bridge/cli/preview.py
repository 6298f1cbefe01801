"""``cotal-tasks check-config --preview``: how a tracker's first issues would map, read
from the tracker and shown, with nothing written anywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.hosted import build_tracker
from cotal_tasks.core import Task
from cotal_tasks.providers import tower_do
from cotal_tasks.providers.hosted.mapping import project


@dataclass(frozen=True, slots=True)
class Preview:
    number: int
    task: Task


async def preview(config: BridgeConfig, endpoint: EndpointConfig, count: int) -> list[Preview]:
    """Map the ``count`` most recently updated issues (evidence included); write nothing."""
    if endpoint.tower_do is not None:  # a board file: its most recently updated rows
        tasks = await asyncio.to_thread(
            tower_do.preview, endpoint.tower_do, space=config.space, count=count
        )
        return [Preview(position, task) for position, task in enumerate(tasks, 1)]
    tracker, tracker_config, http = build_tracker(endpoint)
    try:
        shown: list[Preview] = []
        for number in [issue.number for issue in await tracker.recent(count)]:
            issue = await tracker.fetch(number)
            if issue is None:
                continue
            task = project(
                issue,
                space=config.space,
                rules=tracker_config.status_rules,
                seats=tracker_config.seats,
                existing=None,
                uid_of=lambda owner, actor: None,
                now=issue.updated_at,
            )
            shown.append(Preview(number, task))
        return shown
    finally:
        await http.client.aclose()


def render(previews: list[Preview], echo: Callable[[str], None]) -> None:
    for item in previews:
        task = item.task
        binding = (
            f"{task.binding.owner}.{task.binding.actor}/{task.binding.lifecycleUid}"
            if task.binding
            else "unbound"
        )
        echo(f"{task.taskId}: {task.title}")
        echo(f"    status {task.status} (statusSource {task.statusSource!r}), {binding}")
        for evidence in task.evidence:
            echo(f"    evidence {evidence.kind}: {evidence.ref}")
