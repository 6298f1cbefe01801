"""The calls a caller seat makes: ``describe`` and ``invoke`` (``mcp`` is in ``agent``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from cotal_tasks.bridge.cli.options import (
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
