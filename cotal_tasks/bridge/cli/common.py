"""What the command modules share: the common options, the config and seat parsing, and
running a coroutine (its failures are printed by the command group, ``errors``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from cotal_tasks.bridge.cli.errors import EXIT_USAGE, fail
from cotal_tasks.bridge.config import BridgeConfig, load_config
from cotal_tasks.bridge.process.connection import broker_url, connect
from cotal_tasks.client import TasksClient
from cotal_tasks.core import ContractError, Seat

T = TypeVar("T")
DEFAULT_CALLER = "local.cli/" + "0" * 26

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The bridge's TOML config (default: built-in defaults, a SQLite board in .cotal-tasks).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON (for scripts)."
)
endpoint_option = click.option(
    "--endpoint", default=None, help="Endpoint name (default: the first configured)."
)


def run(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``work``; its failures reach the command group, which prints them (``errors``)."""
    return asyncio.run(work())


def load(path: Path | None) -> BridgeConfig:
    try:
        return load_config(path)
    except ContractError as exc:
        fail(exc.message, EXIT_USAGE)


def parse_seat(text: str, what: str) -> Seat:
    try:
        return Seat.parse(text)
    except ContractError as exc:
        raise click.BadParameter(exc.message, param_hint=what) from exc


async def client_for(config: BridgeConfig, endpoint: str | None, seat: Seat) -> TasksClient:
    """A client over the bridge's own broker connection settings (``nats_url``, creds)."""
    name = config.endpoint(endpoint).name  # an unknown endpoint is refused before connecting
    nc = await connect(config, broker_url(config), once=True)
    return TasksClient(nc, config.space, name, seat, name="cli")
