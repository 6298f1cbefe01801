"""The calls a caller seat makes: ``describe``, ``invoke`` and the agents' ``mcp``."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any, cast

import click

from cotal_tasks.bridge.cli.common import (
    caller_seat,
    client_for,
    config_option,
    endpoint_option,
    json_option,
    load_caller,
    parse_seat,
    run,
    seat_option,
)
from cotal_tasks.bridge.cli.render import human
from cotal_tasks.bridge.process.connection import broker_url
from cotal_tasks.client import Mode, TasksError
from cotal_tasks.core import ErrorCode
from cotal_tasks.core.commands import COMMANDS, MODES


@click.command()
@endpoint_option
@seat_option
@json_option
@config_option
def describe(
    endpoint: str | None, as_seat: str | None, as_json: bool, config_path: Path | None
) -> None:
    """Describe an endpoint over the wire: its commands, capabilities and targeting."""
    config = load_caller(config_path)
    seat = caller_seat(as_seat, None)

    async def work() -> None:
        client = await client_for(config, endpoint, seat)
        try:
            resolved = await client.describe()
        finally:
            await client.nc.close()
        if as_json:
            shown = {
                "endpoint": resolved.endpoint,
                "owner": resolved.owner,
                "instanceId": resolved.instance_id,
                "epoch": resolved.epoch,
                "cluster": {
                    "urn": resolved.urn,
                    "revision": resolved.revision,
                    "digest": resolved.cluster_digest,
                },
                "commands": {
                    row.name: {"capability": row.capability, "targeting": row.targeting()}
                    for row in resolved.commands.values()
                },
            }
            click.echo(json.dumps(shown, indent=2))
            return
        click.echo(
            f"{resolved.endpoint} (owner {resolved.owner}) instance {resolved.instance_id} "
            f"epoch {resolved.epoch}"
        )
        click.echo(f"cluster {resolved.urn} revision {resolved.revision} {resolved.cluster_digest}")
        for row in resolved.commands.values():
            click.echo(f"  {row.name:<16} {row.capability:<12} {row.targeting()}")

    run(work)


@click.command()
@click.argument("command")
@click.option("--args", "args_json", default=None, help="The command's args as a JSON object.")
@seat_option
@click.option("--mode", type=click.Choice(list(MODES)), default=None)
@click.option("--target", default=None, help="Target seat OWNER.ACTOR/UID (modes owner, any).")
@click.option("--id", "request_id", default=None, help="Pin the envelope id (idempotency).")
@click.option(
    "--json/--table",
    "as_json",
    default=None,
    help="The reply envelope as JSON, or for a person (a table of tasks, a task's fields). "
    "Default: JSON unless stdout is a terminal.",
)
@endpoint_option
@config_option
def invoke(
    command: str,
    args_json: str | None,
    as_seat: str | None,
    mode: str | None,
    target: str | None,
    request_id: str | None,
    as_json: bool | None,
    endpoint: str | None,
    config_path: Path | None,
) -> None:
    """Invoke COMMAND over the wire and print the reply (JSON: the envelope)."""
    config = load_caller(config_path)
    spec = COMMANDS.get(command)
    acts = spec is None or spec.effect == "write" or spec.targeted or mode is not None
    seat = caller_seat(as_seat, command if acts else None)
    target_seat = parse_seat(target, "--target") if target else None
    if mode in ("owner", "any") and target_seat is None:
        raise click.UsageError(f"--mode {mode} needs a target seat. Give --target OWNER.ACTOR/UID")
    try:
        args = json.loads(args_json) if args_json is not None else None
    except ValueError as exc:
        raise click.BadParameter(
            f"not JSON ({exc}). Give a JSON object, such as '{{}}'", param_hint="--args"
        ) from exc
    if args is not None and not isinstance(args, dict):
        raise click.BadParameter(
            "is not a JSON object. Give one, such as '{}'", param_hint="--args"
        )

    async def work() -> dict[str, Any]:
        client = await client_for(config, endpoint, seat)
        try:
            answer = await client.invoke_answer(
                command,
                args,
                mode=cast(Mode | None, mode),
                target=target_seat,
                envelope_id=request_id,
            )
        finally:
            await client.nc.close()
        return answer.reply

    machine = as_json if as_json is not None else not sys.stdout.isatty()
    try:
        reply = asyncio.run(work())
    except TasksError as exc:
        unsent = exc.reply is None
        body = exc.reply or {"v": 1, "id": request_id or "unsent", "ok": False}
        _show({**body, "error": exc.as_error()}, machine)
        sys.exit(2 if unsent and exc.code is ErrorCode.BAD_REQUEST else 1)
    _show(reply, machine)
    sys.exit(0 if reply.get("ok") else 1)


def _show(reply: dict[str, Any], machine: bool) -> None:
    if machine:
        click.echo(json.dumps(reply, ensure_ascii=False))
    else:
        human(reply, click.echo)


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
@config_option
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
    from cotal_tasks.bridge.agents.mcp import seat_tools, serve_http, serve_stdio

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the MCP wire
    seat = parse_seat(as_seat, "--as")
    config = load_caller(config_path)
    name = endpoint or config.endpoint(None).name
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

    async def work() -> None:
        url = nats_url or broker_url(config)
        async with seat_tools(url, space or config.space, name, seat, creds) as tools:
            for tool, why in tools.withheld.items():
                click.echo(f"cotal-tasks mcp: {tool} withheld: {why}", err=True)
            if http_address is None:
                await serve_stdio(tools)
            else:
                click.echo(f"cotal-tasks mcp: serving http://{host}:{port}/mcp", err=True)
                await serve_http(tools, host, port)

    run(work)
