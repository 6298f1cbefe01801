"""Request and reply envelopes (SPEC §13.3), checked in the order ``serveEndpoint`` uses.

``parse_request`` is the body half of the boundary (``unsupported-version`` before
anything else, then shape, digests presence, class/verb rules); ``check_agreement`` is
the subject half (``op-mismatch``, ``target-mismatch``, ``sender-mismatch``). Unknown
fields are ignored, as the wire says.

Every refusal carries ``outcome: not-executed``, names the field and what is wrong with
it, shows at most a short preview of the refused value (``validation.preview``) and says
what to send instead. ``is_cast`` reads the verb before anything else is parsed: a body
whose ``replyExpected`` is ``false`` is a cast, and a cast is never answered, not even
when the rest of its envelope is malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cotal_tasks.bridge.service.validation import preview
from cotal_tasks.bridge.wire.subjects import RequestSubject
from cotal_tasks.bridge.wire.values import (
    checked_bind,
    checked_op,
    checked_sender,
    record,
    token,
    uint,
)
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.identity import ID_TOKEN, LIFECYCLE_UID, OWNER_OR_ACTOR

ENVELOPE_V = 1
MAX_MESSAGE = 1000  # characters of an error message on the wire


@dataclass(frozen=True, slots=True)
class Target:
    owner: str
    actor: str
    lifecycleUid: str
    mappingRevision: int | None


@dataclass(frozen=True, slots=True)
class Bind:
    instanceId: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    endpoint: str
    endpoint_token: str
    command: str
    input_digest: str | None
    output_digest: str | None
    cls: str
    reply_expected: bool
    deadline_ms: int | None
    target: Target | None
    bind: Bind | None
    args: dict[str, Any] | None
    from_id: str


def is_cast(raw: Any) -> bool:
    """Whether a decoded body is a cast: its ``replyExpected`` is ``false``.

    Read before the envelope is parsed, so a cast stays unanswered even when the rest of
    its envelope is refused. A body that is no object, or whose ``replyExpected`` is
    missing or no boolean, states no cast and is answered.
    """
    return isinstance(raw, dict) and raw.get("replyExpected") is False


def request_id_of(raw: Any) -> str:
    """The id to echo on an error reply: the request's, when it has a valid one."""
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and ID_TOKEN.fullmatch(raw["id"]):
        return str(raw["id"])
    return "invalid"


def parse_request(raw: Any) -> Request:
    """The request a decoded body states; a refusal says ``not-executed``."""
    try:
        return _parse(raw)
    except ContractError as exc:
        exc.with_outcome("not-executed")
        raise


def _parse(raw: Any) -> Request:
    o = record(raw, "request")
    version = o.get("v")
    if isinstance(version, bool) or version != ENVELOPE_V:
        raise ContractError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"request envelope version {preview(version)} is not {ENVELOPE_V}. Send v: 1",
        )
    request_id = token(o.get("id"), ID_TOKEN, "id")
    op = record(o.get("op"), "op")
    endpoint, endpoint_tok, command, input_digest, output_digest = checked_op(
        op.get("endpoint"), op.get("command"), op.get("inputDigest"), op.get("outputDigest")
    )
    cls = o.get("class")
    if cls not in ("ephemeral", "journal"):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"class {preview(cls)} is not 'ephemeral' or 'journal'. Send the class the "
            "command's row names (ephemeral for every ai.cotal.tasks command)",
        )
    reply_expected = o.get("replyExpected")
    if not isinstance(reply_expected, bool):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"replyExpected is {preview(reply_expected)}, not a boolean. Send true for a call "
            "or false for a cast",
        )
    if cls == "journal" and reply_expected:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "a journal-class submission sets replyExpected: false. Send a call as class ephemeral",
        )
    deadline = o.get("deadlineMs")
    deadline_ms: int | None = None
    if deadline is not None:
        deadline_ms = uint(deadline, "deadlineMs")
        if deadline_ms == 0:
            raise ContractError(
                ErrorCode.BAD_REQUEST, "deadlineMs is 0. Send a positive budget in milliseconds"
            )
    elif reply_expected or cls == "journal":
        raise ContractError(
            ErrorCode.BAD_REQUEST, "deadlineMs is required for a call. Send a budget in ms"
        )
    target = None
    if o.get("target") is not None:
        t = record(o["target"], "target")
        revision = t.get("mappingRevision")
        target = Target(
            token(t.get("owner"), OWNER_OR_ACTOR, "target.owner"),
            token(t.get("actor"), OWNER_OR_ACTOR, "target.actor"),
            token(t.get("lifecycleUid"), LIFECYCLE_UID, "target.lifecycleUid"),
            None if revision is None else uint(revision, "target.mappingRevision"),
        )
    bind = None
    if o.get("bind") is not None:
        if command == "describe":
            raise ContractError(
                ErrorCode.BAD_REQUEST, "describe carries no bind (it produces one). Drop the bind"
            )
        b = record(o["bind"], "bind")
        bind = Bind(*checked_bind(b.get("instanceId"), b.get("epoch")))
    args = o.get("args")
    if args is not None:
        args = record(args, "args")
    sender = record(o.get("from"), "from")
    from_id = checked_sender(sender.get("id"), sender.get("name"))
    return Request(
        request_id,
        endpoint,
        endpoint_tok,
        command,
        input_digest,
        output_digest,
        cls,
        reply_expected,
        deadline_ms,
        target,
        bind,
        args,
        from_id,
    )


def check_agreement(request: Request, subject: RequestSubject) -> None:
    """The body must agree with the broker-authenticated subject.

    A disagreement is refused before anything runs; the caller states ``not-executed``.
    """
    if request.endpoint_token != subject.endpoint_token:
        raise ContractError(
            ErrorCode.OP_MISMATCH,
            f"op.endpoint {preview(request.endpoint)} does not agree with the subject's "
            "endpoint. Send the endpoint name the subject addresses",
        )
    if request.command != subject.command:
        raise ContractError(
            ErrorCode.OP_MISMATCH,
            f"op.command {preview(request.command)} does not agree with the subject's "
            f"{preview(subject.command)}. Name the same command in both",
        )
    if subject.route == "all" and request.deadline_ms is None:
        raise ContractError(
            ErrorCode.BAD_REQUEST, "deadlineMs is required on the scatter rail. Send a budget"
        )
    if request.bind is not None:
        if subject.route == "all":
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                "a bind on the scatter rail has no coherent reading. Drop the bind, or send on "
                "the one or inst rail",
            )
        if subject.route == "inst" and request.bind.instanceId != subject.instance_id:
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                "bind.instanceId contradicts the instance the inst-rail subject names. Bind "
                "to the instance the subject addresses",
            )
    if subject.mode in (None, "self"):
        if request.target is not None:
            shape = "an untargeted" if subject.mode is None else "a self-mode"
            raise ContractError(
                ErrorCode.TARGET_MISMATCH,
                f"a body target on {shape} request is refused, never ignored. Drop the target",
            )
    else:
        if request.target is None:
            raise ContractError(
                ErrorCode.TARGET_MISMATCH,
                f"the {subject.mode} form needs a body target. Send target with owner, actor "
                "and lifecycleUid",
            )
        if request.target.owner != subject.target_owner:
            raise ContractError(
                ErrorCode.TARGET_MISMATCH,
                "target.owner does not equal the subject's target owner token. Send the same "
                "owner in both",
            )
        if (
            len(subject.target_tokens) == 3
            and (
                request.target.actor,
                request.target.lifecycleUid,
            )
            != subject.target_tokens[1:]
        ):
            raise ContractError(
                ErrorCode.TARGET_MISMATCH,
                f"in {subject.mode} mode the body target must equal the subject's target "
                "triple. Send the same seat in both",
            )
    sender = subject.caller.principal
    if request.from_id != sender:
        raise ContractError(
            ErrorCode.SENDER_MISMATCH,
            f"from.id {preview(request.from_id)} does not equal the subject's sender "
            f"{sender}. Send from.id as the principal your credential publishes as",
        )


def ok_reply(request_id: str, data: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {"v": ENVELOPE_V, "id": request_id, "ok": True}
    if data is not None:
        reply["data"] = data
    return reply


def error_reply(request_id: str, error: ContractError) -> dict[str, Any]:
    """The failure envelope: the message bounded, the outcome always stated.

    An error whose raiser could not tell whether an effect ran says ``unknown``, which is
    what an omitted outcome means on the wire anyway; saying it keeps every reply explicit.
    """
    message = error.message
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 15] + " ... (shortened)"
    body: dict[str, Any] = {
        "code": error.code.value,
        "message": message,
        "outcome": error.outcome or "unknown",
    }
    if error.details:
        body["details"] = list(error.details)
    return {"v": ENVELOPE_V, "id": request_id, "ok": False, "error": body}
