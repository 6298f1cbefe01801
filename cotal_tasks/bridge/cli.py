"""The ``cotal-tasks`` command line."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from cotal_tasks.bridge.app import open_endpoint
from cotal_tasks.bridge.config import BridgeConfig, load_config
from cotal_tasks.core import ContractError

T = TypeVar("T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The bridge's TOML config (default: built-in defaults, a SQLite board in .cotal-tasks).",
)


def _run(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(work())
    except ContractError as exc:
        click.echo(f"cotal-tasks: {exc.code.value}: {exc.message}", err=True)
        sys.exit(1)


def _config(path: Path | None) -> BridgeConfig:
    try:
        return load_config(path)
    except ContractError as exc:
        click.echo(f"cotal-tasks: {exc.message}", err=True)
        sys.exit(2)


@click.group()
@click.version_option(package_name="cotal-tasks")
def main() -> None:
    """Serve the ai.cotal.tasks contract over a self-hosted board and hosted trackers."""


@main.command()
@config_option
def serve(config_path: Path | None) -> None:
    """Open every configured endpoint's store and serve it."""
    config = _config(config_path)

    async def work() -> None:
        for endpoint in config.endpoints:
            async with open_endpoint(config, endpoint) as ep:
                seq = await ep.store.change_seq()
                click.echo(f"endpoint {endpoint.name}: board {ep.location} ready (changeSeq {seq})")
        click.echo(
            "The Cotal wire transport (NATS) is not built yet, so there is nothing to serve on; "
            "the board store and the command service are ready and tested (make test)."
        )

    _run(work)


@main.command("check-config")
@config_option
def check_config(config_path: Path | None) -> None:
    """Validate a config file and print what it configures."""
    config = _config(config_path)
    click.echo(f"space: {config.space}")
    click.echo(f"data directory: {config.data_dir}")
    click.echo(f"NATS: {config.nats_url or 'embedded nats-server'}")
    for ep in config.endpoints:
        click.echo(
            f"endpoint {ep.name}: {ep.provider} at {ep.database_url(config.data_dir)}, "
            f"page ceiling {ep.page_ceiling}, idempotency retention "
            f"{ep.idempotency_retention_hours:g} h"
        )


@main.command()
@click.argument("task_id")
@click.option("--endpoint", default=None, help="Endpoint name (default: the first configured).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@config_option
def history(task_id: str, endpoint: str | None, limit: int, config_path: Path | None) -> None:
    """Print a task's append-only history: when, who, which command, status, note."""
    config = _config(config_path)

    async def work() -> None:
        async with open_endpoint(config, config.endpoint(endpoint)) as ep:
            entries = await ep.store.history(task_id, limit)
        if not entries:
            click.echo(f"no history for task {task_id!r}")
        for entry in entries:
            when = datetime.fromtimestamp(entry.at / 1000, tz=UTC).isoformat(timespec="seconds")
            note = f"  {entry.note}" if entry.note else ""
            click.echo(f"{when}  {entry.command:<15} {entry.status:<8} {entry.actor}{note}")

    _run(work)
