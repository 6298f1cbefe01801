"""A reply envelope's bytes: within the broker's payload limit, and a shared answer
serialised once.

A ``get-task`` answer the store holds in memory (``JsonReads.held_json``) is the same
dict, never modified, until the task changes. ``Serialised`` keeps its JSON beside it
(by task id, matched by identity, so a changed task is serialised anew) and the reply
embeds it as an ``orjson.Fragment``: a task read over and over is serialised once, not
once a read. What it keeps is bounded in bytes.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from cotal_tasks.bridge.wire import envelope
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.errors import Outcome

log = logging.getLogger(__name__)

Json = dict[str, Any]
HELD_BYTES = 8 << 20  # the serialised answers kept, in bytes of JSON


class Serialised:
    """The JSON of shared answers, made once per answer (see the module's note)."""

    __slots__ = ("_bytes", "_held")

    def __init__(self) -> None:
        self._held: dict[str, tuple[Json, orjson.Fragment, int]] = {}
        self._bytes = 0

    def task(self, answer: Json) -> orjson.Fragment:
        """``answer`` (a task's wire form the store shares) as a fragment of its JSON."""
        task_id = answer["taskId"]
        held = self._held.get(task_id)
        if held is not None and held[0] is answer:
            return held[1]
        data = orjson.dumps(answer)
        if held is not None:
            self._bytes -= held[2]
        if self._bytes + len(data) > HELD_BYTES:
            self._held.clear()
            self._bytes = 0
        fragment = orjson.Fragment(data)
        self._held[task_id] = (answer, fragment, len(data))
        self._bytes += len(data)
        return fragment


def encode(reply: Json, limit: int | None) -> bytes:
    """The reply's bytes, replaced by a short error when they would not fit ``limit``
    (the broker's payload limit; ``None`` or 0 when it is not known yet)."""
    data = orjson.dumps(reply)
    if not limit or len(data) <= limit:
        return data
    outcome: Outcome = "executed" if reply["ok"] else reply["error"]["outcome"]
    log.error("a %d-byte reply exceeds the %d-byte payload limit", len(data), limit)
    error = ContractError(
        ErrorCode.RESOURCE_EXHAUSTED,
        f"the reply is {len(data)} bytes, over the broker's {limit}-byte payload limit. "
        "Ask for less (a smaller list limit), and report it if it persists",
        outcome=outcome,
    )
    return orjson.dumps(envelope.error_reply(str(reply["id"]), error))
