"""What ``cotal-tasks serve`` prints once the bridge is up: where everything is, who may
read the dashboard (``http.access``, the rule the listener itself follows), and a short
walkthrough of commands to paste into another terminal in the same directory: the CLI
beside this interpreter, ``--config`` when the bridge was given one, and a task id the
board really holds."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from cotal_tasks.bridge.cli.options import EXAMPLE_SEAT
from cotal_tasks.bridge.cli.seed import Seeded
from cotal_tasks.bridge.http.access import http_access
from cotal_tasks.bridge.wire.subjects import event_filter
from cotal_tasks.bridge.wiring.process import Bridge
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.providers.store import PageQuery


async def announcement(bridge: Bridge, seeded: Seeded, config_path: Path | None) -> list[str]:
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
    first = bridge.endpoints[0]
    if first.config.provider == "board":  # the walkthrough writes to a board
        page = await first.store.page(PageQuery(limit=1, statuses=frozenset({"open"})))
        open_task = page.tasks[0].taskId if page.tasks else None
        lines += _walkthrough(config_path, open_task)
    return lines


def _http(bridge: Bridge, url: str) -> list[str]:
    return [
        f"Dashboard: {url}/  ({http_access(bridge.config).short})",
        f"  read API {url}/v1/endpoints, OpenAPI {url}/v1/openapi.json,",
        f"  events {url}/v1/events, health {url}/healthz, metrics {url}/metrics",
        "",
    ]


def _cli() -> str:
    """The command to paste: ``cotal-tasks`` as it was started (``.venv/bin/cotal-tasks``
    in a checkout), else the one beside this interpreter, relative to the working directory
    when it is under it."""
    started = Path(sys.argv[0])
    if started.name == "cotal-tasks" and started.exists():
        return shlex.quote(str(started))
    script = Path(sys.executable).parent / "cotal-tasks"
    here = Path.cwd()
    return shlex.quote(str(script.relative_to(here) if script.is_relative_to(here) else script))


def _walkthrough(config_path: Path | None, open_task: str | None) -> list[str]:
    """The commands, each as it is pasted, with ``--config`` when the bridge was given
    one. With no open task on the board, the claim names ``TASK_ID`` and says to put the
    id ``create-task`` prints in its place."""
    given = "" if config_path is None else f" --config {shlex.quote(str(config_path))}"
    cli = _cli()

    def command(sub: str, rest: str = "") -> str:
        return f"  {cli} {sub}{given}{' ' + rest if rest else ''}"

    task = open_task or "TASK_ID"
    seat = f"--as {EXAMPLE_SEAT}"
    lines = [
        "Walkthrough, from another terminal in this directory (watch the dashboard):",
        command("describe") + "   # the eight commands",
        command("invoke list-tasks") + "   # the board, as the dashboard reads it",
        command("invoke create-task", f'{seat} --args \'{{"title":"Try the board"}}\''),
        command("invoke claim-task", f'{seat} --args \'{{"taskId":"{task}"}}\''),
        "      # the card moves to Claimed without a reload",
        command("invoke update-task", f"{seat} \\"),
        f'      --args \'{{"taskId":"{task}","status":"done",'
        '"evidence":[{"kind":"commit","ref":"9f2c1e7"}]}\'',
        command("invoke my-tasks", seat),
        command("history", task),
    ]
    if open_task is None:
        lines.append(
            "  (the board has no open task: put the taskId create-task printed for TASK_ID)"
        )
    lines.append("examples/walkthrough.md goes further. Stop with Ctrl-C.")
    return lines
