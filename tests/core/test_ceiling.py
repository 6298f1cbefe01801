"""The request ceiling is derived from the contract's bounds and admits every valid request."""

from __future__ import annotations

import json

import orjson

from cotal_tasks.core import COMMANDS
from cotal_tasks.core.ceiling import ENVELOPE_BYTES, largest_input, max_request_bytes
from cotal_tasks.core.messages import UpdateTaskInput
from cotal_tasks.core.models import MAX_EVIDENCE


def _largest_update() -> dict[str, object]:
    """An update-task at every bound, in text that escapes the most (quotes, and four-byte
    characters an ASCII-only encoder writes as two escapes)."""
    return {
        "taskId": '"' * 128,
        "status": "dropped",
        "brief": "\U0001f600" * 1024,
        "note": '"' * 4096,
        "evidence": [{"kind": "review", "ref": '"' * 512} for _ in range(MAX_EVIDENCE)],
    }


def test_the_largest_valid_request_fits_under_the_ceiling_whatever_the_encoder() -> None:
    args = _largest_update()
    UpdateTaskInput.model_validate(args)  # valid: every field at its bound
    envelope = {
        "v": 1,
        "id": "i" * 64,
        "op": {"endpoint": "e" * 253, "command": "update-task", "inputDigest": "d" * 71},
        "class": "ephemeral",
        "replyExpected": True,
        "deadlineMs": 2**53 - 1,
        "from": {"id": "o" * 64 + "." + "a" * 64, "name": "n" * 128},
        "args": args,
    }
    canonical = orjson.dumps(envelope)
    assert len(orjson.dumps(args)) <= largest_input("update-task")
    assert len(canonical) <= max_request_bytes()
    assert len(json.dumps(envelope).encode()) <= max_request_bytes()  # \uXXXX escapes
    assert len(json.dumps(envelope, indent=2).encode()) <= max_request_bytes()


def test_the_ceiling_is_the_largest_input_plus_the_envelope_with_headroom() -> None:
    largest = max(largest_input(name) for name in COMMANDS)
    assert largest == largest_input("update-task")
    assert (
        2 * (largest + ENVELOPE_BYTES)
        <= max_request_bytes()
        < 2 * (largest + ENVELOPE_BYTES) + 1024
    )
    assert max_request_bytes() < 1024 * 1024 // 8  # far under a broker's default 1 MB
