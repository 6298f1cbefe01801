"""A call's args validated once, and a refusal's bounded, remedy-naming message.

``parse_args`` is the one validation a call's args get, on every transport: the wire's
admission calls it and hands the parsed input on (``Call.admitted``); the service calls it
for HTTP and in-process calls. ``describe_validation_error`` words its refusal, with the
contract's remedy where the field has one (``hint_for``).

``preview`` is the one way a refusal shows a value it refused: a short, escaped prefix of
a string, a short number, the type of anything else. A refusal never quotes more, so
neither a huge value (which would push the reply past the broker's payload limit once
escaped) nor a deeply nested one (which would exhaust ``repr``'s recursion) can keep a
caller from hearing why it was refused.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import ValidationError

from cotal_tasks.core import CommandSpec, ContractError, ErrorCode, Input

# Command-specific remedies for refusals whose reason is a contract rule, not a typo.
_HINTS: dict[tuple[str, str], str] = {
    ("create-task", "status"): (
        "A new task is unbound, so it can only be open, done or dropped. Create it, then "
        "claim-task or bind-task binds it"
    ),
    ("update-task", "status"): (
        "A bound task cannot be open. To return it to the board, an operator sends "
        "administer-task with unbind"
    ),
}
_MAX_SHOWN = 3
_MAX_MESSAGE = 300  # one validator message; pydantic's may quote a tag it refused
PREVIEW_CHARS = 32
_READ_INPUTS_KEPT = 4096
_read_inputs: dict[tuple[str, bytes], Input] = {}
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_JSON_TYPES: dict[type, str] = {dict: "a JSON object", list: "a JSON array"}


def preview(value: Any) -> str:
    """A bounded rendering of ``value`` for a refusal message (under 100 characters).

    A string shows as its ASCII-escaped first ``PREVIEW_CHARS`` characters, with its length
    when cut; a boolean, null or short number as JSON spells it; anything else by its type.
    """
    if isinstance(value, str):
        shown = ascii(value[:PREVIEW_CHARS])
        return f"{shown}... ({len(value)} characters)" if len(value) > PREVIEW_CHARS else shown
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, int) and abs(value) < 10**18:
        return str(value)
    if isinstance(value, float):
        return repr(value)[:PREVIEW_CHARS]
    return _JSON_TYPES.get(type(value), "a number" if isinstance(value, int) else "a value")


def field_name(name: int | str) -> str:
    """A location part as a refusal names it: a plain name or index as is, else a preview."""
    if isinstance(name, int) or _PLAIN_NAME.fullmatch(name):
        return str(name)
    return f"[{preview(name)}]"


def hint_for(command: str, field: str) -> str | None:
    """The contract remedy for a refused ``field`` of ``command``'s args, where there is one."""
    return _HINTS.get((command, field))


def describe_validation_error(command: str, exc: ValidationError) -> str:
    parts: list[str] = []
    hints: list[str] = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(field_name(part) for part in error["loc"])
        where = f"args.{loc}" if loc else "args"
        message = error["msg"].removeprefix("Value error, ")[:_MAX_MESSAGE]
        if error["type"] == "task_text":
            parts.append(f"args.{message}")
        else:
            parts.append(f"{where}: {message}")
        hint = hint_for(command, str(error["loc"][0]) if error["loc"] else "")
        if hint and hint not in hints:
            hints.append(hint)
    more = len(errors) - _MAX_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    text = f"{command} args refused: " + "; ".join(parts)
    if hints:
        return text + ". " + "; ".join(hints)
    return text + ". Fix the named fields; describe the endpoint for the input schema"


def parse_args(spec: CommandSpec, args: Any) -> Input:
    """``args`` as ``spec``'s input: the one validation a call's args get.

    A refusal is ``bad-request`` with the message ``describe_validation_error`` writes,
    which never echoes a refused value. Missing args (``None``) are refused: a transport
    whose callers may leave them out passes ``{}`` instead.
    """
    if args is None:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"{spec.name} args are missing. Send a JSON object (an empty one when nothing is set)",
        )
    if spec.effect != "read":
        return _validate(spec, args)
    # A read's args are remembered: the same args validate the same way, and a dashboard
    # or a seat asks for the same task or page over and over. A refusal is never remembered.
    try:
        key = (spec.name, orjson.dumps(args, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return _validate(spec, args)
    parsed = _read_inputs.get(key)
    if parsed is None:
        parsed = _validate(spec, args)
        if len(_read_inputs) >= _READ_INPUTS_KEPT:
            _read_inputs.clear()
        _read_inputs[key] = parsed
    return parsed


def _validate(spec: CommandSpec, args: Any) -> Input:
    try:
        return spec.input.model_validate(args)
    except ValidationError as exc:
        raise ContractError(
            ErrorCode.BAD_REQUEST, describe_validation_error(spec.name, exc)
        ) from exc
    except RecursionError:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"{spec.name} args nest too deeply to check. Send the flat object the schema names",
        ) from None
