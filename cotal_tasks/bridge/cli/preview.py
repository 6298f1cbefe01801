"""``cotal-tasks check-config --preview``: how a tracker's first issues would map, read
from the tracker and shown, with nothing written anywhere."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click

from cotal_tasks.bridge.cli.options import run
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.core import Task
from cotal_tasks.providers.registry import provider


@dataclass(frozen=True, slots=True)
class Preview:
    number: int
    task: Task


async def preview(config: BridgeConfig, endpoint: EndpointConfig, count: int) -> list[Preview]:
    """Map the ``count`` most recently updated items (evidence included); write nothing."""
    show = provider(endpoint.provider).preview
    if show is None:
        return []
    shown = await show(endpoint.settings, config.space, count)
    return [Preview(number, task) for number, task in shown]


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


def show_preview(config: BridgeConfig, target: EndpointConfig, count: int) -> None:
    """Print how ``target``'s ``count`` most recently updated items map."""
    shown = run(lambda: preview(config, target, count))
    click.echo(f"preview of {target.name} (nothing was written):")
    render(shown, click.echo)
