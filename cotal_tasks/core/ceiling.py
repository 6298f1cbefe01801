"""The largest valid request on the wire, derived from the contract's input bounds.

The contract derives an admission ceiling rather than choosing one (section 1, "If a
command becomes journal-class"): the largest canonically serialized input the field
bounds permit, plus the envelope, with headroom. This module is that derivation, made
once, for every command rather than ``bind-task`` alone: a body larger than
``MAX_REQUEST_BYTES`` cannot be a valid request of this cluster, so the wire refuses it
before decoding a byte of it.

The largest input is read off each command's JSON Schema: a string of at most N bytes
(``TaskText<N>``; a pattern-bound token likewise) serializes to at most 2N + 2 bytes, every
admitted character escaping to at most two (``\\"``, ``\\\\``; control characters are
refused); an array holds at most ``maxItems`` of its largest item; an enum is its longest
member. The envelope's allowance covers its fields at their grammar's maxima and the
optional ones a caller may add (``goalId``, ``correlation``, ``auth``). The headroom (twice
the sum) covers encoders that escape more than canonical JSON does (``\\uXXXX`` for
non-ASCII text, at most three bytes per byte of text) and whitespace.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from cotal_tasks.core.commands import COMMANDS
from cotal_tasks.core.schema import json_schema

ENVELOPE_BYTES = 4096  # the envelope around the args: ids, op, digests, target, bind, from
HEADROOM = 2
_NUMBER_BYTES = 16  # an integer up to 2**53 - 1
_KIB = 1024


def _largest(schema: dict[str, Any], defs: dict[str, Any], page: int | None = None) -> int:
    """The most bytes a value valid against ``schema`` takes in canonical JSON; ``page`` is
    the item count of an array the schema leaves unbounded (a page, bounded by the
    endpoint's page ceiling rather than by the contract)."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _largest(defs[ref.rsplit("/", 1)[-1]], defs, page)
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        return max(_largest(branch, defs, page) for branch in branches)
    if "enum" in schema:
        return max(len(repr(member)) for member in schema["enum"])
    if "const" in schema:
        return len(repr(schema["const"])) + 3
    kind = schema.get("type")
    if kind == "string":
        return 2 * int(schema["maxLength"]) + 2
    if kind == "array":
        items = _largest(schema["items"], defs, page)
        count = schema.get("maxItems", page)
        if count is None:
            raise ValueError(f"no item bound for array schema {schema!r}")
        return 2 + int(count) * (items + 1)
    if kind == "object":
        members = schema.get("properties", {})
        return 2 + sum(len(name) + 4 + _largest(sub, defs, page) for name, sub in members.items())
    if kind in ("integer", "number"):
        return _NUMBER_BYTES
    if kind == "boolean":
        return len("false")
    if kind == "null":
        return len("null")
    raise ValueError(f"no size bound for schema {schema!r}")


def _round_up(size: int) -> int:
    return -(-size // _KIB) * _KIB


def largest_input(command: str) -> int:
    """The most bytes ``command``'s args take in canonical JSON."""
    schema = json_schema(COMMANDS[command].input)
    return _largest(schema, schema.get("$defs", {}))


@cache
def max_request_bytes() -> int:
    """The request ceiling: the largest input of any command plus the envelope, with
    headroom, rounded up to a KiB."""
    largest = max(largest_input(name) for name in COMMANDS)
    return _round_up(HEADROOM * (largest + ENVELOPE_BYTES))


def largest_output(command: str, page_ceiling: int) -> int:
    """The most bytes ``command``'s output takes in the bridge's JSON (UTF-8, never
    ``\\uXXXX``), a page holding ``page_ceiling`` tasks at every bound."""
    schema = json_schema(COMMANDS[command].output)
    return _largest(schema, schema.get("$defs", {}), page_ceiling)


@cache
def max_reply_bytes(page_ceiling: int) -> int:
    """The largest reply the bridge sends: the largest output of any command, a page of
    ``page_ceiling`` summaries at their bounds included, inside the reply envelope, rounded
    up to a KiB. A broker whose payload limit is below it can refuse a valid answer."""
    largest = max(largest_output(name, page_ceiling) for name in COMMANDS)
    return _round_up(largest + ENVELOPE_BYTES)


def max_payload_bytes(page_ceiling: int) -> int:
    """The payload limit a broker carrying this bridge needs: the largest valid request
    and the largest reply at ``page_ceiling``, whichever is larger."""
    return max(max_request_bytes(), max_reply_bytes(page_ceiling))
