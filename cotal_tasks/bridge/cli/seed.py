"""Seed the embedded default's board with the example tasks of ``examples/seed-tasks.json``.

Only on a board that has never changed (``changeSeq`` 0), and only through the command
service, so every task has its history and the counter is what the commands made it:
``create-task`` as the file's operator, then ``claim-task`` and ``update-task`` as the
task's seat (mode self), exactly as a seat would over the wire.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.core import ContractError, ErrorCode, Mode, Seat

# The checkout's examples folder (``make run`` runs from an editable install).
SEED_FILE = Path(__file__).resolve().parents[3] / "examples" / "seed-tasks.json"
_CREATE_STATUSES = ("open", "done", "dropped")


@dataclass
class Seeded:
    """What seeding did: the file, and the tasks it created by status."""

    source: Path | None = None
    task_ids: dict[str, list[str]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(ids) for ids in self.task_ids.values())


async def seed_examples(config: BridgeConfig, source: Path = SEED_FILE) -> Seeded:
    """Seed the first endpoint's board from ``source`` when the board has never changed."""
    try:
        text = await asyncio.to_thread(source.read_text, encoding="utf-8")
    except FileNotFoundError:
        return Seeded()  # an installed package without the checkout's examples: no seed
    except OSError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"{source} cannot be read ({exc.strerror}). Fix or remove it"
        ) from exc
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"{source} is not readable JSON ({exc}). Fix or remove it"
        ) from exc
    async with open_endpoint(config, config.endpoints[0]) as endpoint:
        if await endpoint.store.change_seq() != 0:
            return Seeded()
        seeded = Seeded(source)
        operator = Seat.parse(spec["operator"])
        for task in spec["tasks"]:
            status, task_id = await _seed_one(endpoint, operator, task)
            seeded.task_ids.setdefault(status, []).append(task_id)
        return seeded


async def _seed_one(endpoint: Endpoint, operator: Seat, task: Mapping[str, Any]) -> tuple[str, str]:
    seat = Seat.parse(task["seat"]) if "seat" in task else None
    status = task.get("status", "claimed" if seat else "open")
    create: dict[str, Any] = {"title": task["title"]}
    if "brief" in task:
        create["brief"] = task["brief"]
    if seat is None:
        if status not in _CREATE_STATUSES:
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                f"seed task {task['title']!r} is {status} but names no seat. Add a seat",
            )
        create["status"] = status
        if "evidence" in task:
            create["evidence"] = task["evidence"]
    created = await _call(endpoint, "create-task", operator, create)
    task_id = str(created["taskId"])
    if seat is not None:
        await _call(endpoint, "claim-task", seat, {"taskId": task_id}, "self")
        update: dict[str, Any] = {"taskId": task_id}
        if status != "claimed":
            update["status"] = status
        for key in ("evidence", "note"):
            if key in task:
                update[key] = task[key]
        if len(update) > 1:
            await _call(endpoint, "update-task", seat, update, "self")
    return status, task_id


async def _call(
    endpoint: Endpoint,
    command: str,
    caller: Seat,
    args: dict[str, Any],
    mode: Mode | None = None,
) -> dict[str, Any]:
    call = Call(command, caller, "seed-" + secrets.token_urlsafe(12), args, mode)
    return await endpoint.service.handle(call)
