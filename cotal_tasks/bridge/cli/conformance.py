"""``conformance``: judge any ai.cotal.tasks endpoint against section 6 of the contract."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click
from nats.errors import Error as NatsError

from cotal_tasks.bridge.cli.options import parse_seat
from cotal_tasks.core import Seat
from cotal_tasks.core.masking import mask_credentials


async def _quiet(_exc: Exception) -> None:
    """A connection error is the one line below (or a check's FAIL), never a traceback."""


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


@click.command()
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
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document (each check's status and what it saw, and the counts).",
)
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
    as_json: bool,
) -> None:
    """Judge any ai.cotal.tasks endpoint against section 6 of the contract.

    Prints one PASS, FAIL or SKIP line per check and a closing count (``--json``: one
    document); exits 1 when a check failed. It creates tasks on the endpoint it judges.
    """
    from cotal_tasks.client.conformance import (
        Actor,
        Context,
        Hooks,
        run_checks,
        select,
        summary,
    )
    from cotal_tasks.client.subjects import seat_inbox

    creds_by_role = _role_pairs(creds, "--creds")
    seat_by_role = {
        role: parse_seat(text, "--seat") for role, text in _role_pairs(seats, "--seat").items()
    }
    missing = sorted(set(creds_by_role) - set(seat_by_role) - {"runner"})
    if missing:
        raise click.UsageError(
            f"--creds given without --seat for: {', '.join(missing)}. Give "
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

        async def connect_as(path: str | None, who: Seat | None = None) -> Any:
            # A given seat's connection reads under its own inbox prefix, as its grants say.
            inbox = {} if who is None else {"inbox_prefix": seat_inbox(who)}
            nc = await nats.connect(
                nats_url, user_credentials=path, name="cotal-tasks-conformance",
                max_reconnect_attempts=3, error_cb=_quiet, **inbox,
            )  # fmt: skip
            opened.append(nc)
            return nc

        try:
            runner_nc = await connect_as(creds_by_role.get("runner"), seat_by_role.get("runner"))
            given = {}
            for role, seat in seat_by_role.items():
                path = creds_by_role.get(role)
                given[role] = Actor(seat, await connect_as(path, seat) if path else runner_nc)
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
            if not as_json:
                click.echo(
                    f"conformance of {endpoint_name} in space {space} at "
                    f"{mask_credentials(nats_url)} "
                    f"({'open broker: seats invented per check' if open_broker else 'given seats'}"
                    f"{', staging the space' if ctx.stage else ''})"
                )
            results = await run_checks(
                ctx, checks, lambda r: None if as_json else click.echo(r.line())
            )
        finally:
            for nc in opened:
                await nc.close()
        if as_json:
            counts = {s: sum(r.status == s for r in results) for s in ("PASS", "FAIL", "SKIP")}
            report = {
                "endpoint": endpoint_name,
                "space": space,
                "checks": [
                    {
                        "name": r.check.name,
                        "title": r.check.title,
                        "status": r.status,
                        "seen": r.seen,
                    }
                    for r in results
                ],
                "passed": counts["PASS"],
                "failed": counts["FAIL"],
                "skipped": counts["SKIP"],
            }
            click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            click.echo(summary(results))
        return not any(r.status == "FAIL" for r in results)

    try:
        passed = asyncio.run(work())
    except (OSError, NatsError) as exc:
        click.echo(
            f"cotal-tasks: cannot reach {mask_credentials(nats_url)}: "
            f"{mask_credentials(str(exc))}. Check --nats, that the broker runs, "
            "and the --creds file",
            err=True,
        )
        sys.exit(2)  # docs/conformance.md: 1 is a failed check
    sys.exit(0 if passed else 1)
