"""The value checks of a request envelope: one field at a time, each refusal naming the
field, what is wrong with it and what to send instead.

A refusal here is a ``bad-request`` (``contract-mismatch`` for a missing or stray digest)
without an outcome; ``envelope.parse_request`` states ``not-executed`` for every refusal
of a body, and remembers the checked repeating part of an envelope itself.
"""

from __future__ import annotations

import re
from typing import Any

from cotal_tasks.bridge.service.validation import preview
from cotal_tasks.core import ContractError, ErrorCode, endpoint_token
from cotal_tasks.core.identity import COMMAND_TOKEN, LIFECYCLE_UID
from cotal_tasks.core.models import MAX_SAFE_INT

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_MAX_SAFE = MAX_SAFE_INT

Op = tuple[str, str, str, str | None, str | None]


def record(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ContractError(
            ErrorCode.BAD_REQUEST, f"{what} is {preview(value)}, not a JSON object. Send an object"
        )
    return value


def text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else preview(value)
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"{what} is {shown}, not a non-empty string. Send it as the request envelope "
            "defines it",
        )
    return value


def uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SAFE:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"{what} is {preview(value)}, not an integer from 0 to 2^53-1. Send such an integer",
        )
    return value


def token(value: Any, pattern: re.Pattern[str], what: str) -> str:
    """``value`` as a token of core's ``pattern`` grammar (``core.identity``)."""
    checked = text(value, what)
    if not pattern.fullmatch(checked):
        grammar = pattern.pattern.removeprefix("^").removesuffix("$")
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"{what} {preview(checked)} is not a valid token. Send one matching {grammar}",
        )
    return checked


def op(endpoint: Any, command: Any, input_digest: Any, output_digest: Any) -> Op:
    """``op``'s endpoint, its token, the command and the two digests, checked in order."""
    endpoint = text(endpoint, "op.endpoint")
    try:
        endpoint_tok = endpoint_token(endpoint)
    except ContractError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"op.endpoint {preview(endpoint)} is not an endpoint name. Send dot-separated "
            "labels of [a-z0-9-] whose token fits 64 characters, as describe names it",
        ) from exc
    command = token(command, COMMAND_TOKEN, "op.command")
    return (
        endpoint,
        endpoint_tok,
        command,
        _digest(input_digest, "inputDigest", command),
        _digest(output_digest, "outputDigest", command),
    )


def _digest(value: Any, key: str, command: str) -> str | None:
    if value is not None and command == "describe":
        raise ContractError(
            ErrorCode.CONTRACT_MISMATCH,
            f"describe pins no contract, so op.{key} cannot be honored. Send describe "
            "without digests",
        )
    if value is None:
        if command != "describe":
            raise ContractError(
                ErrorCode.CONTRACT_MISMATCH,
                f"op.{key} is required on every command except describe. "
                "Take it from the command's row in the describe answer",
            )
        return None
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"op.{key} {preview(value)} is not a sha256:<64 hex> digest. Send the digest "
            "the command's row in the describe answer names",
        )
    return value


def bind(instance_id: Any, epoch: Any) -> tuple[str, int]:
    """``bind``'s instance id and epoch, checked."""
    return (
        token(instance_id, LIFECYCLE_UID, "bind.instanceId"),
        uint(epoch, "bind.epoch"),
    )


def sender(sender_id: Any, name: Any) -> str:
    """``from.id``, once ``from.id`` and ``from.name`` are both non-empty strings."""
    checked = text(sender_id, "from.id")
    text(name, "from.name")
    return checked
