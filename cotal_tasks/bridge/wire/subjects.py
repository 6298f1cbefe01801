"""Cotal endpoint subjects (SPEC §13.2, §13.15): parse requests, derive replies, name rails.

Request subjects, with ``ep.v1`` inserting a 32-hex generation before the nonce::

    cotal.<s>.ep.one.<e>.<cmd>[.<authz>[.<target…>]].<cO>.<cA>.<cUid>.<nonce>
    cotal.<s>.ep.all.<e>.<cmd>[…].<cO>.<cA>.<cUid>.<nonce>
    cotal.<s>.ep.inst.<e>.<iid>.<cmd>[…].<cO>.<cA>.<cUid>.<nonce>

A subject that fits no shape parses to ``None`` and is never handled or answered.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from cotal_tasks.core import BOARD_CHANGED_TOPIC, ContractError, Seat, space_token
from cotal_tasks.core.identity import (
    COMMAND_TOKEN,
    GENERATION,
    INSTANCE_ID,
    LIFECYCLE_UID,
    NONCE,
    OWNER_OR_ACTOR,
)

Route = Literal["one", "all", "inst"]
# Every authorization mode Cotal defines, with its pinned target-token arity.
MODE_ARITY = {"self": 0, "owner": 1, "any": 1, "child": 1, "ledger": 1, "handle": 3, "exact": 3}
RAILS = ("ep", "ep.v1")
_ROUTES: dict[str, Route] = {"one": "one", "all": "all", "inst": "inst"}


@dataclass(slots=True)
class RequestSubject:
    """A parsed request subject: route, command, authorization block, caller, nonce.

    Read-only by convention, not frozen: one is made for every request, and a frozen
    dataclass's ``__init__`` costs several times as much.
    """

    rail: str  # "ep" or "ep.v1"
    route: Route
    endpoint_token: str
    instance_id: str | None
    command: str
    mode: str | None  # None: untargeted
    target_tokens: tuple[str, ...]
    caller: Seat
    generation: str | None
    nonce: str
    head: str = ""  # the subject up to its nonce (what repeats from request to request)

    @property
    def target_owner(self) -> str | None:
        return self.target_tokens[0] if self.target_tokens else None


@functools.lru_cache(maxsize=64)
def prefix(space: str) -> str:
    return f"cotal.{space_token(space)}"


def parse_request(subject: str, space: str) -> RequestSubject | None:
    """Parse ``subject`` as a request on ``space``; ``None`` when it fits no shape.

    Everything before the nonce repeats from request to request (one caller sending one
    command), so that part is parsed once and remembered; only the nonce is checked anew.
    """
    # 256 characters are at most 1024 bytes in UTF-8: only a longer subject is encoded.
    if len(subject) > 256 and len(subject.encode()) > 1024:
        return None
    head, _, nonce = subject.rpartition(".")
    shape = _head(head, space)
    if shape is None or not NONCE.fullmatch(nonce):
        return None
    return RequestSubject(
        shape.rail,
        shape.route,
        shape.endpoint_token,
        shape.instance_id,
        shape.command,
        shape.mode,
        shape.target_tokens,
        shape.caller,
        shape.generation,
        nonce,
        head,
    )


@functools.lru_cache(maxsize=4096)
def _head(head: str, space: str) -> RequestSubject | None:
    """A request subject up to its nonce, parsed (the nonce is left empty); a miss is
    remembered as ``None`` too, which is as cheap to hold as a hit."""
    tokens = [*head.split("."), ""]
    if tokens[:2] != prefix(space).split(".") or len(tokens) < 9:
        return None
    index = 2
    if tokens[index] != "ep":
        return None
    rail = "ep"
    index += 1
    if tokens[index] == "v1":
        rail = "ep.v1"
        index += 1
    route = _ROUTES.get(tokens[index]) if index < len(tokens) else None
    if route is None:
        return None
    index += 1
    endpoint = tokens[index] if index < len(tokens) else ""
    index += 1
    instance_id = None
    if route == "inst":
        instance_id = tokens[index] if index < len(tokens) else ""
        if not INSTANCE_ID.fullmatch(instance_id):
            return None
        index += 1
    if index >= len(tokens):
        return None
    command = tokens[index]
    index += 1
    tail_size = 5 if rail == "ep.v1" else 4
    middle, tail = tokens[index:-tail_size], tokens[-tail_size:]
    if len(tokens) - index < tail_size or not COMMAND_TOKEN.fullmatch(command) or not endpoint:
        return None
    mode: str | None = None
    target: tuple[str, ...] = ()
    if middle:
        mode = middle[0]
        if mode not in MODE_ARITY or len(middle) - 1 != MODE_ARITY[mode]:
            return None
        target = tuple(middle[1:])
        if not all(OWNER_OR_ACTOR.fullmatch(t) for t in target[:2]):
            return None
        if len(target) == 3 and not LIFECYCLE_UID.fullmatch(target[2]):
            return None
    owner, actor, uid = tail[:3]
    generation = tail[3] if rail == "ep.v1" else None
    if generation is not None and not GENERATION.fullmatch(generation):
        return None
    try:
        caller = Seat(owner, actor, uid)
    except ContractError:
        return None
    return RequestSubject(
        rail, route, endpoint, instance_id, command, mode, target, caller, generation, ""
    )


def reply_head(space: str, request: RequestSubject, instance_id: str, epoch: int) -> str:
    """The reply subject up to the request's nonce (which follows it), ending in a dot:
    derived from the authenticated request subject, never from ``msg.reply``."""
    caller = request.caller
    parts = [
        prefix(space),
        request.rail,
        "reply",
        request.endpoint_token,
        instance_id,
        str(epoch),
        caller.owner,
        caller.actor,
        caller.lifecycleUid,
    ]
    if request.generation is not None:
        parts.append(request.generation)
    parts.append("")
    return ".".join(parts)


@dataclass(frozen=True, slots=True)
class ServeFilter:
    subject: str
    queue: str | None


def serve_filters(
    space: str, endpoint_token: str, instance_id: str, commands: tuple[str, ...]
) -> list[ServeFilter]:
    """Every rail of every command, on ``ep`` and ``ep.v1``: what ``serveEndpoint`` subscribes."""
    filters: list[ServeFilter] = []
    for rail in RAILS:
        base = f"{prefix(space)}.{rail}"
        for command in commands:
            filters.append(ServeFilter(f"{base}.one.{endpoint_token}.{command}.>", endpoint_token))
            filters.append(ServeFilter(f"{base}.all.{endpoint_token}.{command}.>", None))
            filters.append(
                ServeFilter(f"{base}.inst.{endpoint_token}.{instance_id}.{command}.>", None)
            )
    return filters


def event_subject(space: str, endpoint_token: str, instance_id: str, epoch: int) -> str:
    return f"{prefix(space)}.epe.{endpoint_token}.{instance_id}.{epoch}.{BOARD_CHANGED_TOPIC}"


def event_filter(space: str, endpoint_token: str) -> str:
    """What a reader subscribes to for ``board-changed`` from any instance and epoch."""
    return f"{prefix(space)}.epe.{endpoint_token}.*.*.{BOARD_CHANGED_TOPIC}"


def artifact_subject(space: str, hex_digest: str) -> str:
    return f"{prefix(space)}.epc.{hex_digest}"


def stream_names(space: str) -> dict[str, str]:
    """The space's JetStream names: contract store, event stream, presence and records KV."""
    token = space_token(space)
    return {
        "contracts": f"EPC_{token}",
        "events": f"EPE_{token}",
        "presence": f"cotal_presence_{token}",
        "records": f"cotal_records_{token}",
    }
