"""The contract's error catalog and the one exception every layer raises.

The catalog is Cotal's ``EP_ERROR_CODES`` (``endpoint-error.ts``), closed. Every
``ContractError`` carries one of these codes and a message that says what happened
and what to do next; transports translate it to their own shape (a wire error reply,
an HTTP status) and nothing else crosses a layer.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

Outcome = Literal["executed", "not-executed", "unknown"]
# The kind of the error detail a bind-fenced refusal carries (its fenced instance/epoch).
BIND_REFUSED = "ai.cotal.ep.bind-refused"


class ErrorCode(StrEnum):
    """Every code of ``EP_ERROR_CODES``, in the catalog's order."""

    BAD_REQUEST = "bad-request"
    UNSUPPORTED_VERSION = "unsupported-version"
    OP_MISMATCH = "op-mismatch"
    CLASS_MISMATCH = "class-mismatch"
    TARGET_MISMATCH = "target-mismatch"
    SENDER_MISMATCH = "sender-mismatch"
    UNAUTHENTICATED = "unauthenticated"
    PERMISSION_DENIED = "permission-denied"
    NOT_FOUND = "not-found"
    ALREADY_EXISTS = "already-exists"
    CONFLICT = "conflict"
    CONTRACT_MISMATCH = "contract-mismatch"
    CONTRACT_INVALID = "contract-invalid"
    FAILED_PRECONDITION = "failed-precondition"
    DEADLINE_EXCEEDED = "deadline-exceeded"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    UNAVAILABLE = "unavailable"
    UNIMPLEMENTED = "unimplemented"
    RESOURCE_EXHAUSTED = "resource-exhausted"
    INTERNAL = "internal"


class ContractError(Exception):
    """A refusal or failure with a catalog code and a remedy-naming message.

    ``outcome`` is left ``None`` where the raiser cannot know whether an effect ran;
    the transport fills it from where in the pipeline the error surfaced.
    ``details`` are reverse-DNS-kinded objects for the wire's ``error.details``.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        outcome: Outcome | None = None,
        details: tuple[dict[str, Any], ...] = (),
    ) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.outcome = outcome
        self.details = details

    def with_outcome(self, outcome: Outcome) -> ContractError:
        """Return this error with ``outcome`` set, keeping an outcome already known."""
        if self.outcome is None:
            self.outcome = outcome
        return self
