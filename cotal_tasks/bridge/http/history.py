"""The history feed: the store's append-only history (``history_page``) as pages.

Each committed change of a task appended one entry (when, who, which command, the
status it left, the note); the CLI's ``history`` prints one task's. Over HTTP it is paged
as ``list-tasks`` is (``limit`` narrowed to a ceiling and reported as ``appliedLimit``, an
opaque ``nextCursor`` bound to its query), for one task (``taskId``) or for the whole
endpoint (the dashboard's flow chart). Because the history only grows, every page also
carries ``followCursor``, the position after its last entry: passing it later reads only
what was appended since, even when the page said there was no more.
"""

from __future__ import annotations

from typing import Any

from cotal_tasks.bridge.service.commands import CommandService
from cotal_tasks.bridge.service.paging import decode_cursor, encode_cursor
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.store import HistoryEntry, HistoryQuery

Json = dict[str, Any]
COMMAND = "history"
HISTORY_CEILING = 1000  # entries a page answers at most
TASK_ID_BYTES = 128  # the contract's bound on a task id


def entry_json(entry: HistoryEntry) -> Json:
    out: Json = {
        "taskId": entry.task_id,
        "at": entry.at,
        "command": entry.command,
        "actor": entry.actor,
        "status": entry.status,
    }
    if entry.note:
        out["note"] = entry.note
    return out


def _task_id(value: str | None) -> str | None:
    if value is None:
        return None
    if not value or len(value.encode("utf-8")) > TASK_ID_BYTES:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"taskId must be 1 to {TASK_ID_BYTES} bytes. Pass a task id as list-tasks "
            "answers it, or omit taskId for the whole endpoint's history",
        )
    return value


async def history_page(service: CommandService, args: Json) -> Json:
    """The history page ``args`` (``cursor``, ``limit``, ``taskId``) ask for."""
    task_id = _task_id(args.get("taskId"))
    limit = args.get("limit")
    if limit is not None and limit < 1:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "limit must be a whole number of at least 1. Omit it for the ceiling",
        )
    applied = min(limit or HISTORY_CEILING, HISTORY_CEILING)
    scope = [task_id] if task_id is not None else None
    cursor = args.get("cursor")
    after = decode_cursor(cursor, COMMAND, scope) if cursor is not None else None
    store = service.store
    if task_id is not None and after is None:
        await store.get(task_id)  # not-found for a task the endpoint does not have
    change_seq = await store.change_seq()
    observed_at = service.clock()
    page = await store.history_page(HistoryQuery(limit=applied, after=after, task_id=task_id))
    answer: Json = {
        "entries": [entry_json(entry) for entry in page.entries],
        "appliedLimit": applied,
    }
    if page.more and page.last is not None:
        answer["nextCursor"] = encode_cursor(page.last, COMMAND, scope)
    if page.last is not None:
        answer["followCursor"] = encode_cursor(page.last, COMMAND, scope)
    answer["observedAt"] = observed_at
    answer["changeSeq"] = change_seq
    stale = await store.freshness()
    if stale is not None:
        answer["stale"] = stale.to_json()
    return answer
