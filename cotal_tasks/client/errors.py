"""The one exception the client raises, and how a reply's error becomes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from cotal_tasks.core import ContractError, ErrorCode, Outcome

_OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))
_MAX_DETAILS = 8
_MAX_TEXT = 2048


class TasksError(ContractError):
    """A contract error: the endpoint's refusal, or the client's own.

    ``code`` is the catalog code, ``outcome`` says whether the command ran
    (``executed``, ``not-executed`` or ``unknown``; always set) and ``message`` says what
    happened and what to do next. ``reply`` is the raw error reply envelope when the
    error came from the endpoint, ``None`` when the client raised it itself.
    """

    outcome: Outcome

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        outcome: Outcome = "unknown",
        details: tuple[dict[str, Any], ...] = (),
        reply: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code, message, outcome=outcome, details=details)
        self.outcome = outcome
        self.reply = reply

    @property
    def retry_safe(self) -> bool:
        """True when the command certainly did not run, so sending it again is a first try."""
        return self.outcome == "not-executed"

    def as_error(self) -> dict[str, Any]:
        """The wire's ``error`` object for this error."""
        body: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "outcome": self.outcome,
        }
        if self.details:
            body["details"] = list(self.details)
        return body


def usage_error(message: str) -> TasksError:
    """A call the client refuses itself, before anything is sent."""
    return TasksError(ErrorCode.BAD_REQUEST, message, outcome="not-executed")


def from_reply(reply: Mapping[str, Any]) -> TasksError:
    """The ``TasksError`` an ``ok: false`` reply envelope stands for.

    An unknown code or a missing outcome is never guessed into something milder: the
    code becomes ``internal`` and the outcome ``unknown``.
    """
    error = reply.get("error")
    if not isinstance(error, Mapping):
        return TasksError(
            ErrorCode.INTERNAL,
            "the endpoint answered ok: false without an error object. Report it to its operator",
            reply=reply,
        )
    raw_code = error.get("code")
    try:
        code = ErrorCode(str(raw_code))
    except ValueError:
        code = ErrorCode.INTERNAL
    message = error.get("message")
    text = message[:_MAX_TEXT] if isinstance(message, str) and message else "(no message)"
    if code is ErrorCode.INTERNAL and raw_code != ErrorCode.INTERNAL.value:
        text = f"the endpoint answered an error code outside the catalog: {text}"
    outcome_value = error.get("outcome")
    outcome: Outcome = outcome_value if outcome_value in _OUTCOMES else "unknown"
    raw_details = error.get("details")
    details: tuple[dict[str, Any], ...] = ()
    if isinstance(raw_details, list):
        details = tuple(d for d in raw_details[:_MAX_DETAILS] if isinstance(d, dict))
    return TasksError(code, text, outcome=outcome, details=details, reply=reply)
