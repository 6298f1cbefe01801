"""The calls a caller seat makes: ``describe`` and ``invoke`` (``mcp`` is in ``agent``)."""

from __future__ import annotations

import asyncio
import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from cotal_tasks.bridge.cli.errors import EXIT_USAGE, fail, status_of
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
from cotal_tasks.core import ContractError, Seat
from cotal_tasks.core.commands import COMMANDS, MODES, CommandSpec

if TYPE_CHECKING:
    from cotal_tasks.bridge.broker_config import CallerConfig
    from cotal_tasks.client import Mode


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


def _command_names(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    return [name for name in COMMANDS if name.startswith(incomplete)]


def contract_command(name: str) -> CommandSpec:
    """The contract's command ``name``; any other name is refused (exit 2) with the
    nearest one, whether or not a seat was given."""
    spec = COMMANDS.get(name)
    if spec is None:
        near = difflib.get_close_matches(name, list(COMMANDS), n=1, cutoff=0.6)
        hint = f"Did you mean {near[0]}? " if near else ""
        fail(
            f"there is no command {name!r} in the ai.cotal.tasks contract. {hint}Name one of "
            + ", ".join(COMMANDS),
            EXIT_USAGE,
        )
    return spec


def default_mode(spec: CommandSpec, mode: str | None) -> str | None:
    """``--mode`` as given; for a command whose one mode is ``self``, that mode. A command
    with a choice of modes is refused without ``--mode``, naming the options."""
    if mode is not None or not spec.targeted:
        return mode
    if spec.modes == ("self",):
        return "self"
    choices = " or ".join(f"--mode {m}" for m in spec.modes)
    raise click.UsageError(
        f"{spec.name} is targeted ({spec.targeting()}) and no mode was given. Give {choices} "
        "with --target OWNER.ACTOR/UID (the seat it acts on)"
    )


@click.command()
@click.argument("command", shell_complete=_command_names)
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
    """Invoke COMMAND over the wire and print the reply (JSON: the envelope).

    A command whose one mode is self (my-tasks, claim-task, update-task) takes it
    without --mode."""
    spec = contract_command(command)
    mode = default_mode(spec, mode)
    config = load_caller(config_path)
    acts = spec.effect == "write" or spec.targeted
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

    from cotal_tasks.client import TasksError

    async def work() -> dict[str, Any]:
        client = await client_for(config, endpoint, seat)
        try:
            answer = await client.invoke_answer(
                command,
                args,
                mode=cast("Mode | None", mode),
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
        body = exc.reply or {"v": 1, "id": request_id or "unsent", "ok": False}
        reply = {**body, "error": exc.as_error()}
    _show(reply, machine)
    if reply.get("ok"):
        sys.exit(0)
    error = reply.get("error") or {}
    task_id = args.get("taskId") if args is not None else None
    if error.get("code") == "not-found" and endpoint is None and isinstance(task_id, str):
        others = [ep.name for ep in config.endpoints[1:]]
        holder = asyncio.run(_holder(config, others, seat, task_id)) if others else None
        if holder is not None:  # on stderr beside the refusal, for scripts and people alike
            click.echo(
                f"cotal-tasks: endpoint {holder} has task {task_id!r}. Give --endpoint {holder}",
                err=True,
            )
    sys.exit(status_of(str(error.get("code")), error.get("outcome")))


async def _holder(config: CallerConfig, others: list[str], seat: Seat, task_id: str) -> str | None:
    """The first of the config's ``others`` endpoints that answers ``get-task`` for
    ``task_id``; one that cannot be asked is passed over."""
    from cotal_tasks.client import TasksError

    for name in others:
        try:
            client = await client_for(config, name, seat)
        except (TasksError, ContractError):
            continue
        try:
            await client.get_task(task_id)
            return name
        except TasksError:
            continue
        finally:
            await client.nc.close()
    return None


def _show(reply: dict[str, Any], machine: bool) -> None:
    """Scripts get the envelope on stdout; a person gets the result on stdout, and a
    refusal as one line on stderr, as every other failure of the command line."""
    if machine:
        click.echo(json.dumps(reply, ensure_ascii=False))
    else:
        human(reply, click.echo, lambda line: click.echo(line, err=True))
