"""``cotal-tasks mcp``: the agents' tools, started as an agent host starts them.

A host spawns this at every session start and waits for the tool list, so the command
imports what serving the tools needs and no more: the client and the MCP SDK, never the
bridge's config, providers or database libraries unless they are needed. The config file
is read only when it is named (``--config``) or when a setting it holds is not given
(``--nats``, ``--space``, ``--endpoint``).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cotal_tasks.core import Seat


@click.command("mcp")
@click.option(
    "--as",
    "as_seat",
    required=True,
    envvar="COTAL_TASKS_SEAT",
    help="The agent's seat OWNER.ACTOR/UID (its lifecycle uid for this session).",
)
@click.option(
    "--creds",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    envvar="COTAL_TASKS_CREDS",
    help="The seat's own NATS credentials file (an auth mesh).",
)
@click.option("--nats", "nats_url", default=None, help="Broker URL (default: from the config).")
@click.option("--space", default=None, help="Space (default: from the config).")
@click.option("--endpoint", default=None, help="Endpoint name (default: the first configured).")
@click.option(
    "--http",
    "http_address",
    default=None,
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The bridge's TOML config (default: built-in defaults, a SQLite board in .cotal-tasks).",
)
def mcp(
    as_seat: str,
    creds: Path | None,
    nats_url: str | None,
    space: str | None,
    endpoint: str | None,
    http_address: str | None,
    config_path: Path | None,
) -> None:
    """Serve the seat's task tools to a coding agent over MCP (stdio by default)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the MCP wire
    seat = _seat(as_seat)
    host, port = "", 0
    if http_address is not None:
        host, _, port_text = http_address.rpartition(":")
        if not host or not port_text.isdigit():
            raise click.BadParameter(
                f"{http_address!r} is not HOST:PORT. Give one, such as 127.0.0.1:8765",
                param_hint="--http",
            )
        port = int(port_text)
        if host not in ("127.0.0.1", "localhost", "::1"):
            click.echo(
                f"cotal-tasks mcp: warning: {host} is not loopback, and the MCP transport has "
                "no authentication: whoever reaches it acts as this seat",
                err=True,
            )
    if config_path is None and nats_url and space and endpoint:
        url, space_name, name = nats_url, space, endpoint
    else:
        url, space_name, name = _from_config(config_path, nats_url, space, endpoint)

    source = "--nats" if nats_url else f"nats_url in {config_path or 'the default config'}"

    async def work() -> None:
        from cotal_tasks.bridge.agents.mcp import seat_tools, serve_http, serve_stdio
        from cotal_tasks.bridge.cli.errors import fail
        from cotal_tasks.client import TasksError

        async with contextlib.AsyncExitStack() as stack:
            try:
                tools = await stack.enter_async_context(
                    seat_tools(url, space_name, name, seat, creds)
                )
            except TasksError as exc:
                if exc.message.startswith("cannot connect"):  # say where the URL came from
                    fail(f"{exc.message}. The URL is {source}")
                raise
            for tool, why in tools.withheld.items():
                click.echo(f"cotal-tasks mcp: {tool} withheld: {why}", err=True)
            if http_address is None:
                await serve_stdio(tools)
            else:
                click.echo(f"cotal-tasks mcp: serving http://{host}:{port}/mcp", err=True)
                await serve_http(tools, host, port)

    from cotal_tasks.bridge.cli.options import run

    run(work)


def _seat(text: str) -> Seat:
    from cotal_tasks.bridge.cli.options import parse_seat

    return parse_seat(text, "--as")


def _from_config(
    path: Path | None, nats_url: str | None, space: str | None, endpoint: str | None
) -> tuple[str, str, str]:
    """The settings not given, from the config (which the given ones override)."""
    from cotal_tasks.bridge.cli.options import load_caller
    from cotal_tasks.bridge.process.connection import broker_url

    config = load_caller(path)
    # A named config lists the endpoints it serves: a name it does not list is refused
    # (``not-found`` naming them), as ``describe`` and ``invoke`` refuse it.
    named = config.endpoint(endpoint if path is not None else None).name
    return (
        nats_url or broker_url(config),
        space or config.space,
        endpoint or named,
    )
