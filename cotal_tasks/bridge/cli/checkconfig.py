"""``cotal-tasks check-config``: what ``serve`` checks, from the same code, before a deploy.

Offline it validates the file (``load_config``: keys, URL forms, names), runs every check
``serve`` runs before it starts (``preflight``: each ``*_env`` variable set, and its value
one the bridge may use), and says who may read the HTTP listener (``http.access``, the
rule the listener follows). ``--online`` also makes the first connection ``serve`` makes
to the broker, each endpoint's PostgreSQL database and each tracker, with the same
deadlines, and reports each; it is skipped while an offline mistake stands, since it
would only meet that mistake again. Every URL is printed with its password masked.

Exit statuses: 0 all good, 1 an online check failed, 2 the config or its environment is
refused (one ``error:`` line on stderr per mistake, each naming its key and remedy).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cotal_tasks.bridge.cli.errors import EXIT_FAILED, EXIT_USAGE, explain
from cotal_tasks.bridge.cli.options import config_option, json_option, load, run
from cotal_tasks.core.masking import mask_credentials

if TYPE_CHECKING:  # loaded when the command runs, not when a shell completes its options
    from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig


@click.command("check-config")
@click.option(
    "--preview",
    "preview_count",
    type=click.IntRange(1, 100),
    default=None,
    help="Also show how the tracker's N most recently updated issues map (writes nothing).",
)
@click.option(
    "--online",
    is_flag=True,
    help="Also connect to NATS, each PostgreSQL database and each tracker, as serve does.",
)
@click.option(
    "--endpoint",
    default=None,
    help="The endpoint --preview maps (default: the config's only tracker or board file).",
)
@json_option
@config_option
def check_config(
    preview_count: int | None,
    online: bool,
    endpoint: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Validate a config file as serve does, and print what it configures."""
    from cotal_tasks.bridge.http.access import http_access
    from cotal_tasks.bridge.preflight import blocking, preflight

    config = load(config_path)
    report = describe(config)
    found = preflight(config, os.environ)
    report["problems"] = [
        {"key": f.key, "message": f.message, "blocking": f.blocking} for f in found
    ]
    access = http_access(config)
    report["http"] = {"access": access.state, "detail": access.detail}
    stopped = bool(blocking(found))
    if online and not stopped:
        report["online"] = run(lambda: check_online(config))
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print(report, online and stopped)
    if stopped:
        raise SystemExit(EXIT_USAGE)
    if online and not all(check["ok"] for check in report["online"]):
        raise SystemExit(EXIT_FAILED)
    if preview_count is not None:
        from cotal_tasks.bridge.cli.preview import show_preview
        from cotal_tasks.bridge.cli.targets import mirroring_endpoint

        show_preview(config, mirroring_endpoint(config, endpoint, "--preview"), preview_count)


def describe(config: BridgeConfig) -> dict[str, Any]:
    from cotal_tasks.providers.registry import provider

    return {
        "space": config.space,
        "owner": config.owner,
        "dataDir": str(config.data_dir),
        "nats": mask_credentials(config.nats_url) if config.nats_url else "embedded nats-server",
        "endpoints": [
            {
                "name": ep.name,
                "provider": ep.provider,
                "database": mask_credentials(ep.database_url(config.data_dir)),
                "pageCeiling": ep.page_ceiling,
                "idempotencyRetentionHours": ep.idempotency_retention_hours,
                "targetCheck": ep.target_check,
                "settings": provider(ep.provider).describe(ep.settings),
            }
            for ep in config.endpoints
        ],
    }


def _print(report: dict[str, Any], online_skipped: bool) -> None:
    click.echo(f"space: {report['space']} (owner {report['owner']})")
    click.echo(f"data directory: {report['dataDir']}")
    click.echo(f"NATS: {report['nats']}")
    for ep in report["endpoints"]:
        click.echo(
            f"endpoint {ep['name']}: {ep['provider']} at {ep['database']}, page ceiling "
            f"{ep['pageCeiling']}, idempotency retention {ep['idempotencyRetentionHours']:g} h, "
            f"target check {ep['targetCheck']}"
        )
        for line in ep["settings"]:
            click.echo(f"  {line}")
    click.echo(f"HTTP: {report['http']['detail']}")
    for problem in report["problems"]:  # each line names its key and its remedy
        if problem["blocking"]:
            click.echo(f"error: {problem['message']}", err=True)
        else:
            click.echo(f"warning: {problem['message']}")
    if online_skipped:
        click.echo("online checks skipped: fix the errors above first", err=True)
    for check in report.get("online", []):
        click.echo(f"{'ok' if check['ok'] else 'FAILED'}: {check['what']}: {check['detail']}")
        if check.get("writes") is False:  # not a failure: the endpoint serves, read-only
            click.echo(f"warning: {check['what']}: {check['access']}")
        elif "access" in check:
            click.echo(f"  {check['access']}")


async def check_online(config: BridgeConfig) -> list[dict[str, Any]]:
    """The first connections ``serve`` makes, each within its deadline; one entry each."""
    from cotal_tasks.providers.registry import provider

    checks = [await _check_nats(config)]
    for ep in config.endpoints:
        if ep.database is not None and ep.database.startswith("postgresql"):
            checks.append(await _check_database(config, ep))
        if provider(ep.provider).preview is not None:
            checks.append(await _check_tracker(config, ep))
    return checks


async def _check_nats(config: BridgeConfig) -> dict[str, Any]:
    from cotal_tasks.bridge.process.connection import close_connection, connect

    what = "NATS"
    if config.nats_url is None:
        return {"what": what, "ok": True, "detail": "embedded nats-server (started by serve)"}
    try:
        nc = await connect(config, config.nats_url)
    except Exception as exc:
        return _failed(what, exc)
    await close_connection(nc)
    return {"what": what, "ok": True, "detail": f"connected to {mask_credentials(config.nats_url)}"}


async def _check_database(config: BridgeConfig, ep: EndpointConfig) -> dict[str, Any]:
    from cotal_tasks.bridge.wiring import open_store

    what = f"endpoint {ep.name} database"
    try:
        store = await open_store(config, ep, migrate=False)
    except Exception as exc:
        return _failed(what, exc)
    await store.close()
    return {"what": what, "ok": True, "detail": f"connected to {store.label}"}


async def _check_tracker(config: BridgeConfig, ep: EndpointConfig) -> dict[str, Any]:
    from cotal_tasks.bridge.process.trackers import first_contact

    what = f"endpoint {ep.name} tracker"
    try:
        read = await first_contact(config, ep)
    except Exception as exc:
        return _failed(what, exc)
    check: dict[str, Any] = {
        "what": what,
        "ok": True,
        "detail": f"read {read} item(s) with the token",
    }
    from cotal_tasks.providers.registry import provider

    ask = provider(ep.provider).access
    if ask is not None:
        check.update(await _access(config, ep, ask))
    return check


async def _access(config: BridgeConfig, ep: EndpointConfig, ask: Any) -> dict[str, Any]:
    """Whether the token may write back: a read-only token is reported with the remedy,
    not as a failure (the endpoint serves its mirror; its writes are refused)."""
    import asyncio

    from cotal_tasks.bridge.cli.errors import explain

    try:
        found = await asyncio.wait_for(ask(ep.settings), config.tracker_connect_timeout_s)
    except Exception as exc:
        explained = explain(exc)
        why = explained[0] if explained else f"{type(exc).__name__}: no answer"
        return {"writes": None, "access": f"could not tell what the token may do ({why})"}
    if found.writes is False:
        remedy = found.remedy or "Give the token write access to the issues"
        line = (
            f"the token is read-only ({found.detail}): write-back will be refused, so claims "
            f"and updates of this endpoint's tasks fail. {remedy}"
        )
    elif found.writes is None:
        line = f"{found.detail}; write-back is tried as it comes"
    else:
        line = f"the token may write back ({found.detail})"
    return {"writes": found.writes, "access": line}


def _failed(what: str, exc: Exception) -> dict[str, Any]:
    explained = explain(exc)
    if explained is None:
        raise exc
    return {"what": what, "ok": False, "detail": explained[0]}
