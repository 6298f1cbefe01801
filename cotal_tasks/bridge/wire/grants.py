"""The NATS permission rows an operator grants (the shape of Cotal's ``epRequestGrantRows``,
``epBaselineGrantRows`` and ``epServeGrantRows``), for a caller seat or for the bridge.

Every request row pins the caller triple; the nonce (and the ``ep.v1`` generation) is the
only wildcard. ``owner`` mode pins the target owner to the caller's own owner; ``any`` mode
takes a named target owner, or ``*`` only when the operator's policy says so.

No row grants ``_INBOX.>``: replies to a connection's own requests (contract-store and
presence reads) come back under an inbox prefix of its own, and each row set reads that
prefix alone: a seat ``_INBOX.seat.<owner>.<actor>.<uid>`` (``seat_inbox``, which the
typed client connects with), the bridge ``_INBOX.bridge.<space>`` (``bridge_inbox``). So
a seat never hears another seat's replies, nor the bridge's presence reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cotal_tasks.bridge.wire.subjects import prefix, serve_filters, stream_names
from cotal_tasks.client.subjects import seat_inbox
from cotal_tasks.core import (
    BOARD_CHANGED_TOPIC,
    CAPABILITIES,
    COMMANDS,
    ContractError,
    ErrorCode,
    Seat,
    endpoint_token,
    space_token,
)


def bridge_inbox(space: str) -> str:
    """The inbox prefix of the bridge's broker connection in ``space``."""
    return f"_INBOX.bridge.{space_token(space)}"


@dataclass
class Permissions:
    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)

    def add(self, other: Permissions) -> None:
        for mine, theirs in ((self.publish, other.publish), (self.subscribe, other.subscribe)):
            mine.extend(row for row in theirs if row not in mine)

    def as_nats(self) -> dict[str, dict[str, list[str]]]:
        """The ``permissions`` block of a nats-server user."""
        return {"publish": {"allow": self.publish}, "subscribe": {"allow": self.subscribe}}


def _request_rows(
    space: str, token: str, command: str, authz: list[str], caller: Seat
) -> list[str]:
    who = [caller.owner, caller.actor, caller.lifecycleUid]
    base = [prefix(space), "ep", "one", token, command, *authz, *who]
    v1 = [prefix(space), "ep.v1", "one", token, command, *authz, *who]
    return [".".join([*base, "*"]), ".".join([*v1, "*", "*"])]


def baseline_rows(space: str, caller: Seat) -> Permissions:
    """What every caller holds: describe anywhere, contract reads, its own reply rails."""
    who = f"{caller.owner}.{caller.actor}.{caller.lifecycleUid}"
    epc = stream_names(space)["contracts"]
    return Permissions(
        publish=[
            f"{prefix(space)}.ep.one.*.describe.{who}.*",
            f"{prefix(space)}.ep.v1.one.*.describe.{who}.*.*",
            f"$JS.API.DIRECT.GET.{epc}.{prefix(space)}.epc.>",
        ],
        subscribe=[
            f"{prefix(space)}.ep.reply.*.*.*.{who}.*",
            f"{prefix(space)}.ep.v1.reply.*.*.*.{who}.*.*",
            f"{seat_inbox(caller)}.>",  # replies to its contract-store reads, its own
        ],
    )


def caller_rows(
    space: str,
    endpoint: str,
    caller: Seat,
    capabilities: list[str],
    *,
    any_owner: str | None = None,
) -> Permissions:
    """The rows a caller seat holding ``capabilities`` on ``endpoint`` needs."""
    unknown = sorted(set(capabilities) - set(CAPABILITIES))
    if unknown:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"unknown capability {', '.join(unknown)}. Name one of the tasks capabilities: "
            + ", ".join(CAPABILITIES),
        )
    token = endpoint_token(endpoint)
    perms = baseline_rows(space, caller)
    for spec in COMMANDS.values():
        if spec.capability not in capabilities:
            continue
        if not spec.targeted:
            perms.publish += _request_rows(space, token, spec.name, [], caller)
        for mode in spec.modes:
            if mode == "self":
                authz = ["self"]
            elif mode == "owner":
                authz = ["owner", caller.owner]
            elif any_owner is not None:
                authz = ["any", any_owner]
            else:
                continue  # `any` is minted only under operator policy (--any-owner)
            perms.publish += _request_rows(space, token, spec.name, authz, caller)
    if "tasks.read" in capabilities:
        perms.subscribe.append(f"{prefix(space)}.epe.{token}.*.*.{BOARD_CHANGED_TOPIC}")
    return perms


def serve_rows(space: str, endpoint: str, instance_id: str) -> Permissions:
    """The bridge's own rows: serve every rail, reply and publish events as that instance,
    publish contract artifacts, and read presence and lifecycle records."""
    token = endpoint_token(endpoint)
    names = stream_names(space)
    commands = (*COMMANDS, "describe")
    return Permissions(
        publish=[
            f"{prefix(space)}.ep.reply.{token}.{instance_id}.*.*.*.*.*",
            f"{prefix(space)}.ep.v1.reply.{token}.{instance_id}.*.*.*.*.*.*",
            f"{prefix(space)}.epe.{token}.{instance_id}.>",
            f"{prefix(space)}.epc.*",
            f"$JS.API.STREAM.INFO.{names['contracts']}",
            f"$JS.API.STREAM.INFO.KV_{names['presence']}",
            f"$JS.API.STREAM.INFO.KV_{names['records']}",
            f"$JS.API.STREAM.MSG.GET.{names['contracts']}",
            f"$JS.API.STREAM.MSG.GET.KV_{names['records']}",
            f"$JS.API.STREAM.MSG.GET.KV_{names['presence']}",
            f"$JS.API.DIRECT.GET.KV_{names['presence']}.>",
            f"$JS.API.DIRECT.GET.KV_{names['presence']}",
        ],
        subscribe=[
            *(f.subject for f in serve_filters(space, token, instance_id, commands)),
            f"{bridge_inbox(space)}.>",  # replies to its own reads, under its own prefix
        ],
    )
