"""What the command modules share: the common options, the config and seat parsing, and
running a coroutine (its failures are printed by the command group, ``errors``)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cotal_tasks.bridge.broker_config import CallerConfig, load_caller_config
from cotal_tasks.bridge.cli.errors import EXIT_USAGE, fail
from cotal_tasks.core import ContractError, Seat

if TYPE_CHECKING:
    from cotal_tasks.bridge.config import BridgeConfig
    from cotal_tasks.client import TasksClient

T = TypeVar("T")
SEAT_ENV = "COTAL_TASKS_SEAT"
EXAMPLE_SEAT = "local.builder/01j9builder000000000000000"
SEAT_FORM = (
    f"OWNER.ACTOR/UID: the owner and actor as your space names them and the seat's "
    f"lifecycle uid (26 characters), such as {EXAMPLE_SEAT}"
)
seat_option = click.option(
    "--as",
    "as_seat",
    default=None,
    envvar=SEAT_ENV,
    help=f"The caller's seat OWNER.ACTOR/UID (or ${SEAT_ENV}), e.g. {EXAMPLE_SEAT}.",
)

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
    """The whole config, every provider's settings validated (what ``serve`` reads)."""
    from cotal_tasks.bridge.config import load_config
    from cotal_tasks.bridge.config_errors import ConfigRefused

    try:
        return load_config(path)
    except ConfigRefused as exc:  # one line per mistake, each with its key
        for problem in exc.problems[:-1]:
            click.echo(f"cotal-tasks: config {exc.path}: {problem}", err=True)
        fail(f"config {exc.path}: {exc.problems[-1]}", EXIT_USAGE)
    except ContractError as exc:
        fail(exc.message, EXIT_USAGE)


def load_caller(path: Path | None) -> CallerConfig:
    """The caller's part of the config (broker, space, endpoint names): for the commands
    that only reach the bridge, without loading a provider."""
    try:
        return load_caller_config(path)
    except ContractError as exc:
        fail(exc.message, EXIT_USAGE)


def parse_seat(text: str, what: str) -> Seat:
    try:
        return Seat.parse(text)
    except ContractError as exc:
        form = f"{exc.message}. The form is {SEAT_FORM}"
        raise click.BadParameter(form, param_hint=what) from exc


def caller_seat(as_seat: str | None, needed_by: str | None) -> Seat:
    """The caller's seat from ``--as`` (or ``$COTAL_TASKS_SEAT``). A command that acts as
    someone (``needed_by`` names it) must be given one; a read that binds nothing and
    records nobody goes as a fresh anonymous reader (a new uid each call), never as a
    default seat that could be bound."""
    if as_seat is not None:
        return parse_seat(as_seat, "--as")
    if needed_by is not None:
        raise click.UsageError(
            f"{needed_by} acts as a seat, and no seat was given. Give --as {EXAMPLE_SEAT} "
            f"(your own) or export {SEAT_ENV}; the form is {SEAT_FORM}"
        )
    return Seat("local", "cli_reader", secrets.token_hex(13))  # 26 of [a-z0-9]


async def client_for(config: CallerConfig, endpoint: str | None, seat: Seat) -> TasksClient:
    """A client over the config's broker connection settings (``nats_url``, creds, user),
    under ``seat``'s own inbox prefix: the one ``cotal-tasks grants`` prints for it, never
    the bridge's (an operator's config names the operator's ``nats_user``)."""
    from cotal_tasks.bridge.process.connection import broker_url, connect
    from cotal_tasks.client import TasksClient
    from cotal_tasks.client.subjects import seat_inbox

    name = config.endpoint(endpoint).name  # an unknown endpoint is refused before connecting
    nc = await connect(config, broker_url(config), once=True, inbox=seat_inbox(seat))
    return TasksClient(nc, config.space, name, seat, name="cli")
