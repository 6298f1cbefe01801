"""Turn a pydantic validation failure of command args into one remedy-naming message."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from cotal_tasks.core import COMMANDS

# Command-specific remedies for refusals whose reason is a contract rule, not a typo.
_HINTS: dict[tuple[str, str], str] = {
    ("create-task", "status"): (
        "a new task is unbound, so it can only be open, done or dropped; create it, then "
        "claim-task or bind-task binds it"
    ),
    ("update-task", "status"): (
        "a bound task cannot be open; to return it to the board, an operator sends "
        "administer-task with unbind"
    ),
}
_MAX_SHOWN = 3


def hint_for(command: str, field: str) -> str | None:
    """The contract remedy for a refused ``field`` of ``command``'s args, where there is one."""
    return _HINTS.get((command, field))


def describe_validation_error(command: str, exc: ValidationError) -> str:
    parts: list[str] = []
    hints: list[str] = []
    errors = exc.errors(include_url=False, include_input=False)
    for error in errors[:_MAX_SHOWN]:
        loc = ".".join(str(part) for part in error["loc"])
        where = f"args.{loc}" if loc else "args"
        message = error["msg"].removeprefix("Value error, ")
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
        text += ". " + "; ".join(hints)
    return text


def args_refusal(command: str, args: Any) -> str:
    """The message for args the command's schema refused.

    The schema validator's own text quotes the refused value, which may be a secret, so
    the message comes from the command's input model instead: the same shape, with
    remedy-naming text that never echoes a value.
    """
    if args is None:
        return f"{command} args are missing; send a JSON object (an empty one when nothing is set)"
    try:
        COMMANDS[command].input.model_validate(args)
    except ValidationError as exc:
        return describe_validation_error(command, exc)
    return f"{command} args do not fit its input schema; describe the endpoint for the schema"
