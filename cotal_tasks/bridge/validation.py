"""Turn a pydantic validation failure of command args into one remedy-naming message."""

from __future__ import annotations

from pydantic import ValidationError

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
        hint = _HINTS.get((command, str(error["loc"][0]) if error["loc"] else ""))
        if hint and hint not in hints:
            hints.append(hint)
    more = len(errors) - _MAX_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    text = f"{command} args refused: " + "; ".join(parts)
    if hints:
        text += ". " + "; ".join(hints)
    return text
