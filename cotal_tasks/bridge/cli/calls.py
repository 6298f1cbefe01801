"""The calls a caller seat makes: ``describe`` and ``invoke`` (``mcp`` is in ``agent``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from cotal_tasks.bridge.cli.common import (
    DEFAULT_CALLER,
    client_for,
    config_option,
    endpoint_option,
    load,
    parse_seat,
    run,
)
from cotal_tasks.client import Mode, TasksError
from cotal_tasks.core import ErrorCode
from cotal_tasks.core.commands import MODES


@click.command()
@endpoint_option
@click.option("--as", "as_seat", default=DEFAULT_CALLER, show_default=True, help="Caller seat.")
@config_option
def describe(endpoint: str | None, as_seat: str, config_path: Path | None) -> None:
    """Describe an endpoint over the wire: its commands, capabilities and targeting."""
    config = load(config_path)
    seat = parse_seat(as_seat, "--as")

    async def work() -> None:
        client = await client_for(config, endpoint, seat)
        try:
            resolved = await client.describe()
        finally:
            await client.nc.close()
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
@click.option("--as", "as_seat", default=DEFAULT_CALLER, show_default=True, help="Caller seat.")
@click.option("--mode", type=click.Choice(list(MODES)), default=None)
@click.option("--target", default=None, help="Target seat OWNER.ACTOR/UID (modes owner, any).")
@click.option("--id", "request_id", default=None, help="Pin the envelope id (idempotency).")
@endpoint_option
@config_option
def invoke(
    command: str,
    args_json: str | None,
    as_seat: str,
    mode: str | None,
    target: str | None,
    request_id: str | None,
    endpoint: str | None,
    config_path: Path | None,
) -> None:
    """Invoke COMMAND over the wire and print the reply envelope as one JSON object."""
    config = load(config_path)
    seat = parse_seat(as_seat, "--as")
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

    try:
        reply = asyncio.run(work())
    except TasksError as exc:
        unsent = exc.reply is None
        body = exc.reply or {"v": 1, "id": request_id or "unsent", "ok": False}
        click.echo(json.dumps({**body, "error": exc.as_error()}, ensure_ascii=False))
        sys.exit(2 if unsent and exc.code is ErrorCode.BAD_REQUEST else 1)
    click.echo(json.dumps(reply, ensure_ascii=False))
    sys.exit(0 if reply.get("ok") else 1)
