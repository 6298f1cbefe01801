"""``cotal-tasks history``: a task's append-only history, read from the endpoint's local
store (the board, or a tracker's mirror) and nothing else: no tracker is asked and no
token is needed, so it works while the bridge is stopped and without its secrets.

A task the endpoint does not have is ``not-found`` (exit 2); without ``--endpoint``, when
another endpoint of the config holds it, the refusal names that endpoint.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cotal_tasks.bridge.cli.options import config_option, endpoint_option, json_option, load, run
from cotal_tasks.core import ContractError, ErrorCode

if TYPE_CHECKING:
    from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
    from cotal_tasks.providers.store import HistoryEntry


@click.command()
@click.argument("task_id")
@endpoint_option
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10_000))
@json_option
@config_option
def history(
    task_id: str, endpoint: str | None, limit: int, as_json: bool, config_path: Path | None
) -> None:
    """Print a task's append-only history: when, who, which command, status, note.

    It reads the endpoint's own store (a tracker's mirror: no token needed). A task the
    endpoint does not have is refused (exit 2), naming the endpoint that has it."""
    config = load(config_path)
    target = config.endpoint(endpoint)
    others = _served_elsewhere(config, target) if endpoint is None else []
    entries = run(lambda: _read(config, target, task_id, limit, others))
    if as_json:
        rows = [
            {"at": e.at, "command": e.command, "actor": e.actor, "status": e.status,
             "note": e.note}
            for e in entries
        ]  # fmt: skip
        click.echo(json.dumps({"taskId": task_id, "history": rows}, indent=2))
        return
    if not entries:
        click.echo(f"no history for task {task_id!r}")
    for entry in entries:
        when = datetime.fromtimestamp(entry.at / 1000, tz=UTC).isoformat(timespec="seconds")
        note = f"  {entry.note}" if entry.note else ""
        click.echo(f"{when}  {entry.command:<15} {entry.status:<8} {entry.actor}{note}")


async def _read(
    config: BridgeConfig,
    target: EndpointConfig,
    task_id: str,
    limit: int,
    others: list[EndpointConfig],
) -> list[HistoryEntry]:
    """``task_id``'s history on ``target``; its not-found names the first of ``others``
    that holds the task."""
    from cotal_tasks.bridge.wiring import open_store

    store = await open_store(config, target)
    try:
        entries = list(await store.history(task_id, limit))
        if not entries:
            await store.get(task_id)  # not-found for a task it does not have
        return entries
    except ContractError as exc:
        holder = await _holder(config, others, task_id)
        if exc.code is not ErrorCode.NOT_FOUND or holder is None:
            raise
        raise ContractError(
            ErrorCode.NOT_FOUND,
            f"endpoint {target.name} has no task {task_id!r}; endpoint {holder} has it. "
            f"Give --endpoint {holder}",
        ) from exc
    finally:
        await store.close()


def _served_elsewhere(config: BridgeConfig, target: EndpointConfig) -> list[EndpointConfig]:
    """The config's other endpoints whose store is there to read (a SQLite file that was
    never made is passed over, not created)."""
    from sqlalchemy.engine import make_url

    found = []
    for other in config.endpoints:
        url = make_url(other.database_url(config.data_dir))
        made = url.get_backend_name() != "sqlite" or Path(url.database or "").exists()
        if other is not target and made:
            found.append(other)
    return found


async def _holder(config: BridgeConfig, others: list[EndpointConfig], task_id: str) -> str | None:
    """The first of ``others`` whose store holds ``task_id``; one whose store cannot be
    opened is passed over."""
    from cotal_tasks.bridge.wiring import open_store

    for other in others:
        with contextlib.suppress(ContractError):
            store = await open_store(config, other)
            try:
                await store.get(task_id)
                return other.name
            finally:
                await store.close()
    return None
