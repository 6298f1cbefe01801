"""The ``cotal-tasks`` command line.

Exit codes: 0 success, 1 a contract error (the code and message are printed), 2 a usage
or configuration error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from nats.errors import Error as NatsError

from cotal_tasks.bridge.cli.announce import announcement
from cotal_tasks.bridge.cli.preview import preview, render
from cotal_tasks.bridge.cli.seed import Seeded, seed_examples
from cotal_tasks.bridge.config import BridgeConfig, load_config
from cotal_tasks.bridge.process.lifecycle import Bridge, broker_url, connect, serve_until_signalled
from cotal_tasks.bridge.wire.grants import caller_rows, serve_rows
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.client import Mode, TasksClient, TasksError
from cotal_tasks.core import CAPABILITIES, ContractError, ErrorCode, Seat, endpoint_token
from cotal_tasks.providers.hosted.sync import SyncReport

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


def _seat(text: str, what: str) -> Seat:
    try:
        return Seat.parse(text)
    except ContractError as exc:
        raise click.BadParameter(exc.message, param_hint=what) from exc


@click.group()
@click.version_option(package_name="cotal-tasks")
def main() -> None:
    """Serve the ai.cotal.tasks contract over a self-hosted board and hosted trackers."""


def _announce(bridge: Bridge, seeded: Seeded) -> None:
    for line in announcement(bridge, seeded):
        click.echo(line)


@main.command()
@config_option
def serve(config_path: Path | None) -> None:
    """Serve every configured endpoint on the Cotal wire until SIGINT/SIGTERM."""
    config = _config(config_path)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    seeded = Seeded()
    if config_path is None and config.nats_url is None:  # the embedded default (make run)
        seeded = _run(lambda: seed_examples(config))
    _run(lambda: serve_until_signalled(config, lambda bridge: _announce(bridge, seeded)))
    click.echo("cotal-tasks: stopped cleanly")


async def _client(config: BridgeConfig, endpoint: str | None, seat: Seat) -> TasksClient:
    """A client over the bridge's own broker connection settings (``nats_url``, creds)."""
    nc = await connect(config, broker_url(config))
    return TasksClient(nc, config.space, config.endpoint(endpoint).name, seat, name="cli")


@main.command()
@endpoint_option
@click.option("--as", "as_seat", default=DEFAULT_CALLER, show_default=True, help="Caller seat.")
@config_option
def describe(endpoint: str | None, as_seat: str, config_path: Path | None) -> None:
    """Describe an endpoint over the wire: its commands, capabilities and targeting."""
    config = _config(config_path)
    seat = _seat(as_seat, "--as")

    async def work() -> None:
        client = await _client(config, endpoint, seat)
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

    _run(work)


@main.command()
@click.argument("command")
@click.option("--args", "args_json", default=None, help="The command's args as a JSON object.")
@click.option("--as", "as_seat", default=DEFAULT_CALLER, show_default=True, help="Caller seat.")
@click.option("--mode", type=click.Choice(["self", "owner", "any"]), default=None)
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
    config = _config(config_path)
    seat = _seat(as_seat, "--as")
    target_seat = _seat(target, "--target") if target else None
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
        client = await _client(config, endpoint, seat)
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


@main.command("mcp")
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
    seat = _seat(as_seat, "--as")
    config = _config(config_path)
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

    _run(work)


@main.command()
@click.option(
    "--capability",
    "capabilities",
    multiple=True,
    type=click.Choice(CAPABILITIES),
    help="A capability the caller holds (repeatable).",
)
@click.option("--as", "as_seat", default=None, help="The caller seat OWNER.ACTOR/UID.")
@click.option("--any-owner", default=None, help="Mint mode-any bind rows for this target owner "
              "('*' for every owner: operator policy only).")  # fmt: skip
@click.option("--serve", "serve_rows_flag", is_flag=True, help="The bridge's own serve rows.")
@endpoint_option
@config_option
def grants(
    capabilities: tuple[str, ...],
    as_seat: str | None,
    any_owner: str | None,
    serve_rows_flag: bool,
    endpoint: str | None,
    config_path: Path | None,
) -> None:
    """Print the NATS permission rows (publish/subscribe allow lists) to grant."""
    config = _config(config_path)
    name = config.endpoint(endpoint).name
    if serve_rows_flag:
        instance_file = config.data_dir / f"{endpoint_token(name)}.instance.json"
        instance_id = "*"
        if instance_file.exists():
            instance_id = json.loads(instance_file.read_text(encoding="utf-8"))["instanceId"]
        perms = serve_rows(config.space, name, instance_id)
    else:
        if as_seat is None or not capabilities:
            raise click.UsageError(
                "a caller's grants need a seat and its capabilities. Give --as OWNER.ACTOR/UID "
                "and at least one --capability"
            )
        perms = caller_rows(
            config.space, name, _seat(as_seat, "--as"), list(capabilities), any_owner=any_owner
        )
    click.echo(json.dumps({"permissions": perms.as_nats()}, indent=2))


@main.command("check-config")
@click.option(
    "--preview",
    "preview_count",
    type=click.IntRange(1, 100),
    default=None,
    help="Also show how the tracker's N most recently updated issues map (writes nothing).",
)
@endpoint_option
@config_option
def check_config(preview_count: int | None, endpoint: str | None, config_path: Path | None) -> None:
    """Validate a config file and print what it configures."""
    config = _config(config_path)
    click.echo(f"space: {config.space} (owner {config.owner})")
    click.echo(f"data directory: {config.data_dir}")
    click.echo(f"NATS: {config.nats_url or 'embedded nats-server'}")
    for ep in config.endpoints:
        click.echo(
            f"endpoint {ep.name}: {ep.provider} at {ep.database_url(config.data_dir)}, "
            f"page ceiling {ep.page_ceiling}, idempotency retention "
            f"{ep.idempotency_retention_hours:g} h, target check {ep.target_check}"
        )
        tracker = ep.github or ep.gitlab
        if tracker is not None:
            click.echo(
                f"  {ep.provider} at {tracker.api_url}, token from ${tracker.token_env}, "
                f"poll every {tracker.poll_interval_s:g} s, stale after {tracker.stale_after_s:g} s"
            )
            click.echo(f"  {len(tracker.status_rules)} status rules, {len(tracker.seats)} seats")
        if ep.tower_do is not None:
            click.echo(
                f"  tower-do board {ep.tower_do.board_file()}, {len(ep.tower_do.seats)} seats, "
                f"writes as {ep.tower_do.identity!r}, poll every {ep.tower_do.poll_interval_s:g} s"
            )
    if preview_count is None:
        return
    target = config.endpoint(endpoint)
    if target.provider == "board":
        raise click.UsageError(
            f"{target.name} is a board, and --preview shows what a hosted tracker or a "
            "tower-do board would mirror. Name such an endpoint"
        )
    shown = _run(lambda: preview(config, target, preview_count))
    click.echo(f"preview of {target.name} (nothing was written):")
    render(shown, click.echo)


@main.command()
@endpoint_option
@config_option
def sync(endpoint: str | None, config_path: Path | None) -> None:
    """Import (or catch up) a hosted tracker endpoint into its mirror, with progress.

    Run it before the first `serve`, or while the bridge is stopped: the bridge's own
    sync loop holds the mirror while it runs.
    """
    config = _config(config_path)
    target = config.endpoint(endpoint)
    if target.provider == "board":
        raise click.UsageError(f"{target.name} is a board. There is nothing to sync")
    if target.tower_do is not None:

        async def catch_up() -> int:
            async with open_endpoint(config, target, serve=True) as opened:
                assert opened.tower_do is not None
                return await opened.tower_do.store.refresh()  # opening folded it already

        _run(catch_up)
        click.echo(f"{target.name}: caught up with {target.tower_do.board_file()}")
        return

    degraded: dict[str, int] = {}

    async def work() -> SyncReport:
        async with open_endpoint(config, target, serve=True) as opened:
            assert opened.hosted is not None
            bar: Any = None

            def progress(done: int, total: int | None) -> None:
                nonlocal bar
                if bar is None and total:
                    bar = click.progressbar(length=total, label=f"syncing {target.name}")
                    bar.__enter__()
                if bar is not None:
                    bar.update(done - bar.pos)
                else:
                    click.echo(f"  {done} page(s) read", err=True)

            try:
                return await opened.hosted.sync.poll_once(progress)
            finally:
                if bar is not None:
                    bar.__exit__(None, None, None)
                degraded.update(opened.hosted.store.degradations()["counts"])

    report = _run(work)
    state = "unchanged (one conditional request)" if report.not_modified else "synced"
    click.echo(
        f"{target.name}: {state}: {report.pages} page(s), {report.issues} issue(s) read, "
        f"{report.fetched} fetched with evidence, {report.changed} task(s) changed"
    )
    if degraded:
        counts = ", ".join(f"{n} {reason}" for reason, n in degraded.items())
        click.echo(
            f"{target.name}: {sum(degraded.values())} item(s) degraded ({counts}); each kept "
            "what was valid or was skipped; the log names the items"
        )


@main.command()
@click.argument("task_id")
@endpoint_option
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


# -- conformance ------------------------------------------------------------------------------


def _role_pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        role, sep, rest = value.partition("=")
        if not sep or not role or not rest:
            raise click.BadParameter(
                f"{value!r} is not ROLE=VALUE. Give the role, then = and the value",
                param_hint=option,
            )
        pairs[role] = rest
    return pairs


@main.command()
@click.option("--nats", "nats_url", required=True, help="The broker URL of the space.")
@click.option("--space", required=True, help="The space the endpoint serves.")
@click.option("--endpoint", "endpoint_name", required=True, help="The endpoint name to judge.")
@click.option(
    "--creds",
    "creds",
    multiple=True,
    metavar="ROLE=FILE",
    help="A NATS credentials file per role (operator, seat, other, successor, self-only); "
    "ROLE 'runner' is the runner's own connection.",
)
@click.option(
    "--seat",
    "seats",
    multiple=True,
    metavar="ROLE=OWNER.ACTOR/UID",
    help="The seat a role's credentials publish as (needed with --creds).",
)
@click.option(
    "--stage-space/--no-stage-space",
    default=None,
    help="Write lifecycle heads and presence cards for the runner's seats (default: on "
    "without --creds, an open broker).",
)
@click.option(
    "--store-unreadable",
    is_flag=True,
    help="The operator has made the endpoint's store unreadable: run check 03 against it.",
)
@click.option("--check", "only", multiple=True, help="Run only checks whose name starts so.")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per request.")
def conformance(
    nats_url: str,
    space: str,
    endpoint_name: str,
    creds: tuple[str, ...],
    seats: tuple[str, ...],
    stage_space: bool | None,
    store_unreadable: bool,
    only: tuple[str, ...],
    timeout: float,
) -> None:
    """Judge any ai.cotal.tasks endpoint against section 6 of the contract.

    Prints one PASS, FAIL or SKIP line per check and a closing count; exits 1 when a
    check failed. It creates tasks on the endpoint it judges.
    """
    from cotal_tasks.client.conformance import (
        Actor,
        Context,
        Hooks,
        run_checks,
        select,
        summary,
    )

    creds_by_role = _role_pairs(creds, "--creds")
    seat_by_role = {
        role: _seat(text, "--seat") for role, text in _role_pairs(seats, "--seat").items()
    }
    missing = sorted(set(creds_by_role) - set(seat_by_role) - {"runner"})
    if missing:
        raise click.UsageError(
            f"--creds names roles without a --seat: {', '.join(missing)}. Give "
            "--seat ROLE=OWNER.ACTOR/UID for each"
        )
    try:
        checks = select(only)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--check") from exc
    open_broker = not creds_by_role

    async def work() -> bool:
        import nats

        opened: list[Any] = []

        async def connect_as(path: str | None) -> Any:
            nc = await nats.connect(
                nats_url, user_credentials=path, name="cotal-tasks-conformance",
                max_reconnect_attempts=3,
            )  # fmt: skip
            opened.append(nc)
            return nc

        try:
            runner_nc = await connect_as(creds_by_role.get("runner"))
            given = {}
            for role, seat in seat_by_role.items():
                path = creds_by_role.get(role)
                given[role] = Actor(seat, await connect_as(path) if path else runner_nc)
            ctx = Context(
                runner_nc,
                space,
                endpoint_name,
                given=given,
                invent=open_broker,
                stage=open_broker if stage_space is None else stage_space,
                hooks=Hooks(store_unreadable=store_unreadable),
                timeout=timeout,
            )
            click.echo(
                f"conformance of {endpoint_name} in space {space} at {nats_url} "
                f"({'open broker: seats invented per check' if open_broker else 'given seats'}"
                f"{', staging the space' if ctx.stage else ''})"
            )
            results = await run_checks(ctx, checks, lambda r: click.echo(r.line()))
        finally:
            for nc in opened:
                await nc.close()
        click.echo(summary(results))
        return not any(r.status == "FAIL" for r in results)

    try:
        passed = asyncio.run(work())
    except (OSError, NatsError) as exc:
        click.echo(f"cotal-tasks: cannot reach {nats_url}: {exc}", err=True)
        sys.exit(2)
    sys.exit(0 if passed else 1)
