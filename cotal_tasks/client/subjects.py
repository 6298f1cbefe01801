"""The subjects a caller writes and reads (Cotal SPEC §13.2), for one caller seat.

A request goes to ``cotal.<s>.ep.one.<e>.<cmd>[.<mode>[.<targetOwner>]].<o>.<a>.<uid>.<nonce>``;
its reply comes back on the caller's own rail
``cotal.<s>.ep.reply.<e>.<instanceId>.<epoch>.<o>.<a>.<uid>.<nonce>``, which names the
answering instance: the broker lets a responder publish only its own instance and epoch
there, so the subject, never the body, says who answered.
"""

from __future__ import annotations

from dataclasses import dataclass

from cotal_tasks.core import BOARD_CHANGED_TOPIC, Seat, space_token
from cotal_tasks.core.identity import INSTANCE_ID

_REPLY_TOKENS = 11


def space_prefix(space: str) -> str:
    return f"cotal.{space_token(space)}"


def seat_tokens(seat: Seat) -> str:
    return f"{seat.owner}.{seat.actor}.{seat.lifecycleUid}"


def request_subject(
    space: str,
    token: str,
    command: str,
    caller: Seat,
    nonce: str,
    *,
    mode: str | None = None,
    target_owner: str | None = None,
) -> str:
    parts = [space_prefix(space), "ep", "one", token, command]
    if mode is not None:
        parts.append(mode)
        if mode != "self":
            parts.append(target_owner or "")
    parts += [seat_tokens(caller), nonce]
    return ".".join(parts)


def reply_filter(space: str, caller: Seat, nonce: str) -> str:
    """This request's replies, from any instance and epoch, on the caller's own rail."""
    return f"{space_prefix(space)}.ep.reply.*.*.*.{seat_tokens(caller)}.{nonce}"


def no_responders_subject(space: str, caller: Seat, nonce: str) -> str:
    """The reply-to of a request: a sentinel on the caller's rail that no responder may
    publish to, so only the broker's no-responders status reaches it."""
    return f"{space_prefix(space)}.ep.reply._nr._nr._nr.{seat_tokens(caller)}.{nonce}"


@dataclass(frozen=True, slots=True)
class Responder:
    """Who answered, as the reply subject (broker-pinned) says."""

    endpoint_token: str
    instance_id: str
    epoch: int


def parse_reply(subject: str, space: str, caller: Seat, nonce: str) -> Responder | None:
    """The responder of a reply on this caller's rail for ``nonce``; ``None`` when the
    subject is not such a reply."""
    tokens = subject.split(".")
    head = f"{space_prefix(space)}.ep.reply".split(".")
    if len(tokens) != _REPLY_TOKENS or tokens[:4] != head:
        return None
    if ".".join(tokens[7:10]) != seat_tokens(caller) or tokens[10] != nonce:
        return None
    instance_id, epoch = tokens[5], tokens[6]
    if not INSTANCE_ID.fullmatch(instance_id) or not epoch.isdigit():
        return None
    return Responder(tokens[4], instance_id, int(epoch))


def artifact_subject(space: str, hex_digest: str) -> str:
    return f"{space_prefix(space)}.epc.{hex_digest}"


def contracts_stream(space: str) -> str:
    return f"EPC_{space_token(space)}"


def board_changed_filter(space: str, token: str) -> str:
    """``board-changed`` from any instance and epoch of the endpoint."""
    return f"{space_prefix(space)}.epe.{token}.*.*.{BOARD_CHANGED_TOPIC}"
