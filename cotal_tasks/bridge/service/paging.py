"""Page cursors: opaque to callers, bound to the query they continue.

A cursor carries the keyset position and a short fingerprint of the query (command,
status filter), so a cursor from one query handed to another is refused rather than
silently skipping or repeating tasks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable

from cotal_tasks.core import ContractError, ErrorCode

_MAX_POSITION = 2**63 - 1  # positions are signed 64-bit keys in every store


def _fingerprint(command: str, statuses: Iterable[str] | None) -> str:
    key = command + "|" + ",".join(sorted(set(statuses))) if statuses else command
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def encode_cursor(position: int, command: str, statuses: Iterable[str] | None) -> str:
    payload = json.dumps({"p": position, "q": _fingerprint(command, statuses)}).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_cursor(cursor: str, command: str, statuses: Iterable[str] | None) -> int:
    """The position ``cursor`` continues after, or ``bad-request``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        position = data["p"]
        query = data["q"]
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "cursor is not one this endpoint issued. Pass nextCursor from the previous page "
            "unchanged, or omit cursor to start from the first page",
        ) from exc
    if (
        not isinstance(position, int)
        or isinstance(position, bool)
        or not 0 <= position <= _MAX_POSITION
    ):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "cursor is damaged. Omit cursor to start from the first page",
        )
    if query != _fingerprint(command, statuses):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"cursor belongs to a different {command} query (another status filter or "
            "command). Repeat the query it came from, or omit cursor to start over",
        )
    return position
