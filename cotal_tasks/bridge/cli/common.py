"""What the command modules share: the common options, the config and seat parsing, and
running a coroutine with a contract error printed as the exit status."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cotal_tasks.core import ContractError, Seat

if TYPE_CHECKING:  # imported where used: ``mcp`` starts without the config's providers
    from cotal_tasks.bridge.config import BridgeConfig
    from cotal_tasks.client import TasksClient

T = TypeVar("T")
DEFAULT_CALLER = "local.cli/" + "0" * 26

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The bridge's TOML config (default: built-in defaults, a SQLite board in .cotal-tasks).",
)
endpoint_option = click.option(
    "--endpoint", default=None, help="Endpoint name (default: the first configured)."
)


def run(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(work())
    except ContractError as exc:
        click.echo(f"cotal-tasks: {exc.code.value}: {exc.message}", err=True)
        sys.exit(1)


def load(path: Path | None) -> BridgeConfig:
    from cotal_tasks.bridge.config import load_config

    try:
        return load_config(path)
    except ContractError as exc:
        click.echo(f"cotal-tasks: {exc.message}", err=True)
        sys.exit(2)


def parse_seat(text: str, what: str) -> Seat:
    try:
        return Seat.parse(text)
    except ContractError as exc:
        raise click.BadParameter(exc.message, param_hint=what) from exc


async def client_for(config: BridgeConfig, endpoint: str | None, seat: Seat) -> TasksClient:
    """A client over the bridge's own broker connection settings (``nats_url``, creds)."""
    from cotal_tasks.bridge.process.connection import broker_url, connect
    from cotal_tasks.client import TasksClient

    nc = await connect(config, broker_url(config))
    return TasksClient(nc, config.space, config.endpoint(endpoint).name, seat, name="cli")
