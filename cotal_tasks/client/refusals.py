"""Remedy-naming messages for args the client refuses before sending.

A refused value may be a secret, so no message quotes one: a command of this contract is
explained through its input model (the same shape as its schema), any other through the
paths the schema refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from cotal_tasks.core import COMMANDS

_MAX_SHOWN = 3


def validation_message(command: str, exc: ValidationError) -> str:
    """``<command> args refused: args.<field>: <why>; …`` without the refused values."""
    parts: list[str] = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "task_text":
            parts.append(f"args.{message}")  # TaskText names its own field
        else:
            parts.append(f"{'args.' + loc if loc else 'args'}: {message}")
    if len(errors) > _MAX_SHOWN:
        parts.append(f"and {len(errors) - _MAX_SHOWN} more")
    return f"{command} args refused before sending: " + "; ".join(parts)


def args_refused(command: str, args: Mapping[str, Any], validator: Any) -> str:
    """Why the endpoint's input schema (``validator``) refuses ``args``."""
    spec = COMMANDS.get(command)
    if spec is not None:
        try:
            spec.input.model_validate(dict(args))
        except ValidationError as exc:
            return validation_message(command, exc) + "; fix the args and send again"
    paths = sorted(
        {"/".join(str(p) for p in error.instance_path) for error in validator.iter_errors(args)}
    )
    where = ", ".join("args" + ("/" + p if p else "") for p in paths[:_MAX_SHOWN])
    return (
        f"{command} args do not fit the input schema the endpoint published (at {where}); "
        "describe the endpoint for the schema and send args that fit it"
    )
