"""The operator's commands: ``grants`` and ``sync`` (``history`` has its own module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cotal_tasks.bridge.cli.options import (
    config_option,
    endpoint_option,
    json_option,
    load,
    parse_seat,
    run,
)
from cotal_tasks.core import CAPABILITIES, endpoint_token

if TYPE_CHECKING:  # the providers and the databases load when a command runs, not to complete it
    from cotal_tasks.providers.provider import CatchUpReport


@click.command()
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
    from cotal_tasks.bridge.wire.grants import caller_rows, serve_rows

    config = load(config_path)
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
            config.space, name, parse_seat(as_seat, "--as"), list(capabilities), any_owner=any_owner
        )
    click.echo(json.dumps({"permissions": perms.as_nats()}, indent=2))


@click.command()
@click.option(
    "--endpoint",
    default=None,
    help="The endpoint to sync (default: the config's only tracker or board file).",
)
@json_option
@config_option
def sync(endpoint: str | None, as_json: bool, config_path: Path | None) -> None:
    """Import (or catch up) a hosted tracker endpoint into its mirror, with progress.

    Run it before the first `serve`, or while the bridge is stopped: the bridge's own
    sync loop holds the mirror while it runs.
    """
    from cotal_tasks.bridge.cli.targets import mirroring_endpoint
    from cotal_tasks.bridge.wiring import open_endpoint

    config = load(config_path)
    target = mirroring_endpoint(config, endpoint, "sync")
    degraded: dict[str, int] = {}
    budgets: list[dict[str, Any]] = []

    async def work() -> CatchUpReport:
        async with open_endpoint(config, target, serve=True) as opened:
            if opened.catch_up is None:
                raise click.UsageError(f"{target.name} has nothing to sync. Name another")
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
                return await opened.catch_up(None if as_json else progress)
            finally:
                if bar is not None:
                    bar.__exit__(None, None, None)
                if opened.degradations is not None:
                    degraded.update(opened.degradations()["counts"])
                if opened.rate_budgets is not None:
                    budgets.extend(budget.to_json() for budget in opened.rate_budgets())

    report = run(work)
    if as_json:
        shown: dict[str, Any] = {"endpoint": target.name, "degraded": degraded}
        shown["rateBudgets"] = budgets  # what the tracker's answers said is left, per pool
        shown.update(report.figures)
        shown["lines"] = list(report.lines)
        click.echo(json.dumps(shown, indent=2))
        return
    for line in report.lines:
        click.echo(f"{target.name}: {line}")
    for budget in budgets:
        pool = f" ({budget['resource']})" if budget.get("resource") else ""
        of = f" of {budget['limit']}" if budget.get("limit") is not None else ""
        click.echo(f"{target.name}: rate limit{pool}: {budget['remaining']}{of} left")
    if degraded:
        counts = ", ".join(f"{n} {reason}" for reason, n in degraded.items())
        click.echo(
            f"{target.name}: {sum(degraded.values())} item(s) degraded ({counts}); each kept "
            "what was valid or was skipped; the log names the items"
        )
