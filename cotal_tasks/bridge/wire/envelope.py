"""Request and reply envelopes (SPEC §13.3), checked in the order ``serveEndpoint`` uses.

``parse_request`` is the body half of the boundary (``unsupported-version`` before
anything else, then shape, digests presence, class/verb rules); ``check_agreement`` is
the subject half (``op-mismatch``, ``target-mismatch``, ``sender-mismatch``). Unknown
fields are ignored, as the wire says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cotal_tasks.bridge.wire.subjects import RequestSubject
from cotal_tasks.core import ContractError, ErrorCode, endpoint_token
from cotal_tasks.core.identity import COMMAND_TOKEN, ID_TOKEN, LIFECYCLE_UID

ENVELOPE_V = 1
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_MAX_SAFE = 2**53 - 1


def _fail(code: ErrorCode, message: str) -> ContractError:
    return ContractError(code, message, outcome="not-executed")


def _record(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(ErrorCode.BAD_REQUEST, f"{what} is not a JSON object; send an object")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(ErrorCode.BAD_REQUEST, f"{what} is not a non-empty string")
    return value


def _uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SAFE:
        raise _fail(ErrorCode.BAD_REQUEST, f"{what} is not a non-negative safe integer")
    return value


def _token(value: Any, pattern: re.Pattern[str], what: str, grammar: str) -> str:
    text = _text(value, what)
    if not pattern.fullmatch(text):
        raise _fail(ErrorCode.BAD_REQUEST, f"{what} {text!r} is not a valid token ({grammar})")
    return text


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


def request_id_of(raw: Any) -> str:
    """The id to echo on an error reply: the request's, when it has a valid one."""
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and ID_TOKEN.fullmatch(raw["id"]):
        return str(raw["id"])
    return "invalid"


def parse_request(raw: Any) -> Request:
    o = _record(raw, "request")
    version = o.get("v")
    if isinstance(version, bool) or version != ENVELOPE_V:
        raise _fail(
            ErrorCode.UNSUPPORTED_VERSION,
            f"request envelope version {version!r} is not {ENVELOPE_V}; send v: 1",
        )
    request_id = _token(o.get("id"), ID_TOKEN, "id", "[A-Za-z0-9_-]{1,64}")
    op = _record(o.get("op"), "op")
    endpoint = _text(op.get("endpoint"), "op.endpoint")
    try:
        endpoint_token(endpoint)
    except ContractError as exc:
        raise _fail(ErrorCode.BAD_REQUEST, exc.message) from exc
    command = _token(op.get("command"), COMMAND_TOKEN, "op.command", "[a-z0-9-]{1,32}")
    digests: dict[str, str | None] = {}
    for key in ("inputDigest", "outputDigest"):
        value = op.get(key)
        if value is not None and command == "describe":
            raise _fail(
                ErrorCode.CONTRACT_MISMATCH,
                f"describe pins no contract, so op.{key} cannot be honored; send describe "
                "without digests",
            )
        if value is None:
            if command != "describe":
                raise _fail(
                    ErrorCode.CONTRACT_MISMATCH,
                    f"op.{key} is required on every command except describe; "
                    "take it from the command's row in the describe answer",
                )
            digests[key] = None
            continue
        if not isinstance(value, str) or not _DIGEST.fullmatch(value):
            raise _fail(ErrorCode.BAD_REQUEST, f"op.{key} is not a sha256:<64 hex> digest")
        digests[key] = value
    cls = o.get("class")
    if cls not in ("ephemeral", "journal"):
        raise _fail(ErrorCode.BAD_REQUEST, f"class {cls!r} is not 'ephemeral' or 'journal'")
    reply_expected = o.get("replyExpected")
    if not isinstance(reply_expected, bool):
        raise _fail(ErrorCode.BAD_REQUEST, "replyExpected is not a boolean")
    if cls == "journal" and reply_expected:
        raise _fail(ErrorCode.BAD_REQUEST, "a journal-class submission sets replyExpected: false")
    deadline = o.get("deadlineMs")
    deadline_ms: int | None = None
    if deadline is not None:
        deadline_ms = _uint(deadline, "deadlineMs")
        if deadline_ms == 0:
            raise _fail(ErrorCode.BAD_REQUEST, "deadlineMs must be a positive budget, never zero")
    elif reply_expected or cls == "journal":
        raise _fail(ErrorCode.BAD_REQUEST, "deadlineMs is required for a call; send a budget in ms")
    target = None
    if o.get("target") is not None:
        t = _record(o["target"], "target")
        revision = t.get("mappingRevision")
        target = Target(
            _text(t.get("owner"), "target.owner"),
            _text(t.get("actor"), "target.actor"),
            _token(t.get("lifecycleUid"), LIFECYCLE_UID, "target.lifecycleUid", "[a-z0-9]{26,32}"),
            None if revision is None else _uint(revision, "target.mappingRevision"),
        )
    bind = None
    if o.get("bind") is not None:
        if command == "describe":
            raise _fail(ErrorCode.BAD_REQUEST, "describe carries no bind: it produces one")
        b = _record(o["bind"], "bind")
        bind = Bind(
            _token(b.get("instanceId"), LIFECYCLE_UID, "bind.instanceId", "[a-z0-9]{26,32}"),
            _uint(b.get("epoch"), "bind.epoch"),
        )
    args = o.get("args")
    if args is not None:
        args = _record(args, "args")
    sender = _record(o.get("from"), "from")
    from_id = _text(sender.get("id"), "from.id")
    _text(sender.get("name"), "from.name")
    return Request(
        request_id,
        endpoint,
        command,
        digests["inputDigest"],
        digests["outputDigest"],
        cls,
        reply_expected,
        deadline_ms,
        target,
        bind,
        args,
        from_id,
    )


def check_agreement(request: Request, subject: RequestSubject) -> None:
    """The body must agree with the broker-authenticated subject."""
    if endpoint_token(request.endpoint) != subject.endpoint_token:
        raise _fail(
            ErrorCode.OP_MISMATCH,
            f"op.endpoint {request.endpoint!r} does not agree with the subject's endpoint",
        )
    if request.command != subject.command:
        raise _fail(
            ErrorCode.OP_MISMATCH,
            f"op.command {request.command!r} does not agree with the subject's {subject.command!r}",
        )
    if subject.route == "all" and request.deadline_ms is None:
        raise _fail(ErrorCode.BAD_REQUEST, "deadlineMs is required on the scatter rail")
    if request.bind is not None:
        if subject.route == "all":
            raise _fail(ErrorCode.BAD_REQUEST, "a bind on the scatter rail has no coherent reading")
        if subject.route == "inst" and request.bind.instanceId != subject.instance_id:
            raise _fail(
                ErrorCode.BAD_REQUEST,
                "bind.instanceId contradicts the instance the inst-rail subject names",
            )
    if subject.mode in (None, "self"):
        if request.target is not None:
            shape = "an untargeted" if subject.mode is None else "a self-mode"
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                f"a body target on {shape} request is refused, never ignored; drop the target",
            )
    else:
        if request.target is None:
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                f"the {subject.mode} form needs a body target (owner, actor, lifecycleUid)",
            )
        if request.target.owner != subject.target_owner:
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                "target.owner does not equal the subject's target owner token",
            )
        if (
            len(subject.target_tokens) == 3
            and (
                request.target.actor,
                request.target.lifecycleUid,
            )
            != subject.target_tokens[1:]
        ):
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                f"in {subject.mode} mode the body target must equal the subject's target triple",
            )
    sender = subject.caller.principal
    if request.from_id != sender:
        raise _fail(
            ErrorCode.SENDER_MISMATCH,
            f"from.id {request.from_id!r} does not equal the subject's sender {sender!r}",
        )


def ok_reply(request_id: str, data: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {"v": ENVELOPE_V, "id": request_id, "ok": True}
    if data is not None:
        reply["data"] = data
    return reply


def error_reply(request_id: str, error: ContractError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code.value, "message": error.message}
    if error.details:
        body["details"] = list(error.details)
    if error.outcome is not None:
        body["outcome"] = error.outcome
    return {"v": ENVELOPE_V, "id": request_id, "ok": False, "error": body}
