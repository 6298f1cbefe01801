"""The request ceiling is derived from the contract's bounds and admits every valid request."""

from __future__ import annotations

import json

import orjson

from cotal_tasks.core import COMMANDS
from cotal_tasks.core.ceiling import (
    ENVELOPE_BYTES,
    largest_input,
    max_payload_bytes,
    max_reply_bytes,
    max_request_bytes,
)
from cotal_tasks.core.messages import UpdateTaskInput
from cotal_tasks.core.models import MAX_EVIDENCE, TaskSummary


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


def _summary_at_every_bound(n: int) -> dict[str, object]:
    """A page summary whose every text is at its bound, in the text that escapes the most."""
    return {
        "version": "ai.cotal.tasks.task/v1",
        "taskId": f"{n:04d}" + '"' * 124,
        "space": '"' * 128,
        "title": '"' * 200,
        "status": "claimed",
        "statusSource": '"' * 64,
        "binding": {
            "owner": '"' * 128,
            "actor": '"' * 128,
            "lifecycleUid": '"' * 128,
            "environment": '"' * 2048,
            "boundAt": 2**53 - 1,
            "boundBy": '"' * 128,
        },
        "createdAt": 2**53 - 1,
        "updatedAt": 2**53 - 1,
    }


def test_a_full_page_at_every_bound_fits_the_reply_ceiling() -> None:
    """The broker's payload limit must carry every answer the bridge can give: a page of
    ``page_ceiling`` summaries at their bounds, in the reply envelope."""
    for ceiling in (1, 100, 1000):
        summaries = [_summary_at_every_bound(n) for n in range(ceiling)]
        for summary in summaries[:2]:
            TaskSummary.model_validate(summary)  # valid: every field at its bound
        reply = {
            "v": 1,
            "id": "i" * 64,
            "ok": True,
            "data": {
                "tasks": summaries,
                "appliedLimit": ceiling,
                "nextCursor": "c" * 512,
                "observedAt": 2**53 - 1,
                "changeSeq": 2**53 - 1,
                "stale": {"staleAsOf": 2**53 - 1, "reason": '"' * 512},
            },
        }
        assert len(orjson.dumps(reply)) <= max_reply_bytes(ceiling)
        assert max_payload_bytes(ceiling) >= max(max_reply_bytes(ceiling), max_request_bytes())


def test_the_payload_limit_at_the_default_page_ceiling_is_under_a_brokers_default() -> None:
    """At the default ceiling of 100 a page at every bound needs more than a request does,
    and still less than nats-server's default 1 MB."""
    assert max_request_bytes() < max_reply_bytes(100) == max_payload_bytes(100) < 1024 * 1024
