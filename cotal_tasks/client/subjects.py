"""The subjects a caller writes and reads (Cotal SPEC §13.2), for one caller seat.

A request goes to ``cotal.<s>.ep.one.<e>.<cmd>[.<mode>[.<targetOwner>]].<o>.<a>.<uid>.<nonce>``;
its reply comes back on the caller's own rail
``cotal.<s>.ep.reply.<e>.<instanceId>.<epoch>.<o>.<a>.<uid>.<nonce>``, which names the
answering instance: the broker lets a responder publish only its own instance and epoch
there, so the subject, never the body, says who answered. On the versioned rail ``ep.v1``
both carry the caller's generation between the caller triple and the nonce.
"""

from __future__ import annotations

from dataclasses import dataclass

from cotal_tasks.core import BOARD_CHANGED_TOPIC, Seat, space_token
from cotal_tasks.core.identity import GENERATION, INSTANCE_ID


def space_prefix(space: str) -> str:
    return f"cotal.{space_token(space)}"


def seat_tokens(seat: Seat) -> str:
    return f"{seat.owner}.{seat.actor}.{seat.lifecycleUid}"


def seat_inbox(seat: Seat) -> str:
    """The inbox prefix of ``seat``'s connection (nats-py's ``inbox_prefix``): the replies
    to its own requests (contract-store reads) come back under it, and its grants let it
    read there only, never ``_INBOX.>``, where every other connection's replies go."""
    return f"_INBOX.seat.{seat_tokens(seat)}"


@dataclass(frozen=True, slots=True)
class Responder:
    """Who answered, as the reply subject (broker-pinned) says."""

    endpoint_token: str
    instance_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class CallerRail:
    """One caller seat's subjects on the ``ep`` rail, or on ``ep.v1`` with a generation
    (32 lowercase hex characters) between the caller triple and the nonce (SPEC §13.15)."""

    space: str
    caller: Seat
    generation: str | None = None

    def __post_init__(self) -> None:
        if self.generation is not None and not GENERATION.fullmatch(self.generation):
            raise ValueError("a generation is 32 lowercase hex characters")

    @property
    def plane(self) -> str:
        return "ep" if self.generation is None else "ep.v1"

    def _tail(self, nonce: str) -> str:
        middle = "" if self.generation is None else f".{self.generation}"
        return f"{seat_tokens(self.caller)}{middle}.{nonce}"

    def request(
        self,
        token: str,
        command: str,
        nonce: str,
        *,
        mode: str | None = None,
        target_owner: str | None = None,
    ) -> str:
        parts = [space_prefix(self.space), self.plane, "one", token, command]
        if mode is not None:
            parts.append(mode)
            if mode != "self":
                parts.append(target_owner or "")
        parts.append(self._tail(nonce))
        return ".".join(parts)

    def reply_filter(self, nonce: str) -> str:
        """This request's replies, from any instance and epoch, on the caller's own rail."""
        return f"{space_prefix(self.space)}.{self.plane}.reply.*.*.*.{self._tail(nonce)}"

    def no_responders(self, nonce: str) -> str:
        """The reply-to of a request: a sentinel on the caller's rail that no responder may
        publish to, so only the broker's no-responders status reaches it."""
        return f"{space_prefix(self.space)}.{self.plane}.reply._nr._nr._nr.{self._tail(nonce)}"

    def parse_reply(self, subject: str, nonce: str) -> Responder | None:
        """The responder of a reply on this rail for ``nonce``; ``None`` when the subject
        is not such a reply."""
        head = f"{space_prefix(self.space)}.{self.plane}.reply."
        if not subject.startswith(head):
            return None
        tokens = subject.removeprefix(head).split(".", 3)
        if len(tokens) != 4 or tokens[3] != self._tail(nonce):
            return None
        token, instance_id, epoch = tokens[:3]
        if not INSTANCE_ID.fullmatch(instance_id) or not epoch.isdigit():
            return None
        return Responder(token, instance_id, int(epoch))


def artifact_subject(space: str, hex_digest: str) -> str:
    return f"{space_prefix(space)}.epc.{hex_digest}"


def contracts_stream(space: str) -> str:
    return f"EPC_{space_token(space)}"


def board_changed_filter(space: str, token: str) -> str:
    """``board-changed`` from any instance and epoch of the endpoint."""
    return f"{space_prefix(space)}.epe.{token}.*.*.{BOARD_CHANGED_TOPIC}"
