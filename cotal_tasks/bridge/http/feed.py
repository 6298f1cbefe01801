"""The dashboard's board feed: a ``list-tasks`` page whose tasks are full records.

It answers exactly what ``list-tasks`` answers (the same arguments, ceiling, cursors,
``stale`` marker and error codes; a cursor from one continues the other), except that
each task is its full record, as ``get-task`` would answer it. The records come in the
page's own read (the store's ``page_records``), so a column of the board costs one page
read, not one read per task.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from cotal_tasks.bridge.service.commands import CommandService
from cotal_tasks.bridge.service.paging import decode_cursor, encode_cursor
from cotal_tasks.bridge.service.validation import describe_validation_error
from cotal_tasks.core import ContractError, ErrorCode, ListTasksInput
from cotal_tasks.providers.store import JsonReads, PageQuery

Json = dict[str, Any]
COMMAND = "list-tasks"


async def record_page(service: CommandService, args: Json) -> Json:
    """The ``list-tasks`` page ``args`` ask for, each task as its full record."""
    try:
        return await _record_page(service, args)
    except ContractError as exc:
        raise exc.with_outcome("not-executed") from None


async def _record_page(service: CommandService, args: Json) -> Json:
    try:
        parsed = ListTasksInput.model_validate(args)
    except ValidationError as exc:
        raise ContractError(ErrorCode.BAD_REQUEST, describe_validation_error(COMMAND, exc)) from exc
    store = service.store
    ceiling = service.settings.page_ceiling
    applied = min(parsed.limit or ceiling, ceiling)
    statuses = parsed.status
    after = decode_cursor(parsed.cursor, COMMAND, statuses) if parsed.cursor is not None else None
    change_seq = await store.change_seq()
    observed_at = service.clock()
    query = PageQuery(
        limit=applied, after=after, statuses=frozenset(statuses) if statuses else None
    )
    if isinstance(store, JsonReads):
        stored = await store.page_records_json(query)
        tasks, last, more = list(stored.tasks), stored.last, stored.more
    else:
        page = await store.page_records(query)
        tasks, last, more = [task.to_json() for task in page.tasks], page.last, page.more
    stale = await store.freshness()
    # The key order of ``TaskPage.to_json()``, as list-tasks answers.
    answer: Json = {"tasks": tasks, "appliedLimit": applied}
    if more and last is not None:
        answer["nextCursor"] = encode_cursor(last, COMMAND, statuses)
    answer["observedAt"] = observed_at
    answer["changeSeq"] = change_seq
    if stale is not None:
        answer["stale"] = stale.to_json()
    return answer
