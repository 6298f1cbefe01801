"""What ``cotal-tasks serve`` prints once the bridge is up: where everything is, and a short
walkthrough of commands to try against it."""

from __future__ import annotations

from cotal_tasks.bridge.cli.options import EXAMPLE_SEAT
from cotal_tasks.bridge.cli.seed import Seeded
from cotal_tasks.bridge.http.auth import is_loopback_host
from cotal_tasks.bridge.wire.subjects import event_filter
from cotal_tasks.bridge.wiring.process import Bridge
from cotal_tasks.core.masking import mask_credentials

CLI = ".venv/bin/cotal-tasks"


def announcement(bridge: Bridge, seeded: Seeded) -> list[str]:
    config = bridge.config
    where = "embedded nats-server" if bridge.embedded else "NATS"
    lines = [
        f"cotal-tasks: serving space {config.space!r} on {where} at {mask_credentials(bridge.url)}"
    ]
    for endpoint, server in zip(bridge.endpoints, bridge.servers, strict=True):
        ident = server.identity
        lines.append(
            f"  endpoint {endpoint.config.name}: board {endpoint.location}, "
            f"instance {ident.instance_id} epoch {ident.epoch}"
        )
        lines.append(f"    board-changed events: {event_filter(config.space, server.token)}")
    if seeded.count and seeded.source is not None:
        lines.append(
            f"  seeded {seeded.count} example tasks from {seeded.source.parent.name}/"
            f"{seeded.source.name} (first run of the embedded default)"
        )
    lines.append("")
    if bridge.http_url is not None:
        lines += _http(bridge, bridge.http_url)
    if bridge.endpoints[0].config.provider == "board":  # the walkthrough writes to a board
        lines += _walkthrough(seeded)
    return lines


def _http(bridge: Bridge, url: str) -> list[str]:
    config = bridge.config
    if config.http.tokens:
        access = "send a bearer token from [[http.tokens]]; the page asks for one"
    elif bridge.embedded and is_loopback_host(config.http.host):
        access = "loopback: no token needed"
    else:
        access = "closed until [[http.tokens]] are configured (see docs/http.md)"
    return [
        f"Dashboard: {url}/  ({access})",
        f"  read API {url}/v1/endpoints, OpenAPI {url}/v1/openapi.json,",
        f"  events {url}/v1/events, health {url}/healthz, metrics {url}/metrics",
        "",
    ]


def _walkthrough(seeded: Seeded) -> list[str]:
    open_ids = seeded.task_ids.get("open", [])
    task = open_ids[0] if open_ids else "t-…"
    seat = f"--mode self --as {EXAMPLE_SEAT}"
    return [
        "Walkthrough, from another terminal in this checkout (watch the dashboard):",
        f"  {CLI} describe                  # the eight commands",
        f"  {CLI} invoke list-tasks         # the board, as the dashboard reads it",
        f'  {CLI} invoke create-task --as {EXAMPLE_SEAT} --args \'{{"title":"Try the board"}}\'',
        f'  {CLI} invoke claim-task {seat} --args \'{{"taskId":"{task}"}}\'',
        "      # the card moves to Claimed without a reload",
        f"  {CLI} invoke update-task {seat} \\",
        f'      --args \'{{"taskId":"{task}","status":"done",'
        '"evidence":[{"kind":"commit","ref":"9f2c1e7"}]}\'',
        f"  {CLI} invoke my-tasks {seat}",
        f"  {CLI} history {task}",
        "examples/walkthrough.md goes further. Stop with Ctrl-C.",
    ]
