"""How a record is stored and read back: the columns of a write, and the stored JSON.

The board stores each record twice as compact JSON text: ``body`` (the full record, the
``get-task`` answer) and ``summary`` (the page form). Both are written only after the
record passed every bound of the contract's model, so a read hands them out as decoded
JSON without rebuilding the model; it still checks that the row is a JSON object of the
contract's record version, so a damaged row reads as ``unavailable``, never as something
else (and the wire checks every answer against the command's output schema).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from cotal_tasks.core import TASK_VERSION, ContractError, ErrorCode, Task

Json = dict[str, Any]
_SUMMARY_DROPS = ("brief", "evidence")


class Columns(NamedTuple):
    """The values of a task row beside its id, revision and creation time, in the order
    both backends' statements take them."""

    status: str
    bound_owner: str | None
    bound_actor: str | None
    bound_uid: str | None
    body: str
    summary: str
    updated_at: int


def columns(task: Task) -> Columns:
    """The values of ``task``'s row."""
    binding = task.binding
    body = task.to_json()
    # The summary is the record without brief and evidence (``Task.summary``), in the same
    # key order; built from the dict, it costs no second model validation.
    summary = {key: value for key, value in body.items() if key not in _SUMMARY_DROPS}
    return Columns(
        task.status,
        binding.owner if binding else None,
        binding.actor if binding else None,
        binding.lifecycleUid if binding else None,
        orjson.dumps(body).decode(),
        orjson.dumps(summary).decode(),
        task.updatedAt,
    )


def damaged() -> ContractError:
    return ContractError(
        ErrorCode.UNAVAILABLE,
        "a stored task record does not validate; the board's data is damaged. "
        "Restore it from a backup, or fix the row with the operator tools",
    )


def stored_json(text: str | bytes) -> Json:
    """A stored body or summary as JSON, or ``unavailable`` when the row is damaged."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise damaged() from None
    if type(value) is not dict or value.get("version") != TASK_VERSION:
        raise damaged()
    return value


class Decoded:
    """Decoded page forms, keyed by their stored text.

    The same text always decodes to the same value, so this needs no invalidation: a
    changed record is stored as new text. A page of 100 then costs its query, not 100
    JSON decodes. The values are shared between answers and never modified.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._values: dict[str, Json] = {}

    def __call__(self, text: str) -> Json:
        value = self._values.get(text)
        if value is None:
            value = stored_json(text)
            if len(self._values) >= self.capacity:
                self._values.clear()
            self._values[text] = value
        return value


def reason_of(exc: BaseException) -> str:
    """A database failure in a few words: its class and the first line of its message."""
    reason = type(exc).__name__
    orig = getattr(exc, "orig", None)
    if orig is not None:
        reason = f"{type(orig).__name__}: {str(orig).splitlines()[0][:200]}"
    elif str(exc):
        reason = f"{reason}: {str(exc).splitlines()[0][:200]}"
    return reason


def unavailable(where: str, exc: BaseException | str) -> ContractError:
    """A database failure (or its reason) as the contract's ``unavailable``, naming what failed."""
    reason = exc if isinstance(exc, str) else reason_of(exc)
    return ContractError(
        ErrorCode.UNAVAILABLE,
        f"the board store cannot be read ({where}: {reason}). Check the endpoint's database "
        "(the server running and reachable, or the SQLite file a readable board), then retry",
    )
