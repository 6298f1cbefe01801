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

import functools
import re
from dataclasses import dataclass
from typing import Any

from cotal_tasks.bridge.service.validation import preview
from cotal_tasks.bridge.wire.subjects import RequestSubject
from cotal_tasks.core import ContractError, ErrorCode, endpoint_token
from cotal_tasks.core.identity import COMMAND_TOKEN, ID_TOKEN, LIFECYCLE_UID, OWNER_OR_ACTOR

ENVELOPE_V = 1
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_MAX_SAFE = 2**53 - 1
MAX_MESSAGE = 1000  # characters of an error message on the wire


def _fail(code: ErrorCode, message: str) -> ContractError:
    return ContractError(code, message, outcome="not-executed")


def _record(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(
            ErrorCode.BAD_REQUEST, f"{what} is {preview(value)}, not a JSON object; send an object"
        )
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else preview(value)
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"{what} is {shown}, not a non-empty string; send it as the request envelope "
            "defines it",
        )
    return value


def _uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SAFE:
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"{what} is {preview(value)}, not an integer from 0 to 2^53-1; send such an integer",
        )
    return value


def _token(value: Any, pattern: re.Pattern[str], what: str, grammar: str) -> str:
    text = _text(value, what)
    if not pattern.fullmatch(text):
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"{what} {preview(text)} is not a valid token; send one matching {grammar}",
        )
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


@dataclass(slots=True)
class Request:
    """A parsed request envelope; read-only by convention (not frozen, as one is made
    for every request and a frozen dataclass's ``__init__`` costs several times as much)."""

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
    o = _record(raw, "request")
    version = o.get("v")
    if isinstance(version, bool) or version != ENVELOPE_V:
        raise _fail(
            ErrorCode.UNSUPPORTED_VERSION,
            f"request envelope version {preview(version)} is not {ENVELOPE_V}; send v: 1",
        )
    request_id = _token(o.get("id"), ID_TOKEN, "id", "[A-Za-z0-9_-]{1,64}")
    op = _record(o.get("op"), "op")
    endpoint, token, command, input_digest, output_digest = _checked_op(
        op.get("endpoint"), op.get("command"), op.get("inputDigest"), op.get("outputDigest")
    )
    cls = o.get("class")
    if cls not in ("ephemeral", "journal"):
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"class {preview(cls)} is not 'ephemeral' or 'journal'; send the class the "
            "command's row names (ephemeral for every ai.cotal.tasks command)",
        )
    reply_expected = o.get("replyExpected")
    if not isinstance(reply_expected, bool):
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"replyExpected is {preview(reply_expected)}, not a boolean; send true for a call "
            "or false for a cast",
        )
    if cls == "journal" and reply_expected:
        raise _fail(
            ErrorCode.BAD_REQUEST,
            "a journal-class submission sets replyExpected: false; send a call as class ephemeral",
        )
    deadline = o.get("deadlineMs")
    deadline_ms: int | None = None
    if deadline is not None:
        deadline_ms = _uint(deadline, "deadlineMs")
        if deadline_ms == 0:
            raise _fail(
                ErrorCode.BAD_REQUEST, "deadlineMs is 0; send a positive budget in milliseconds"
            )
    elif reply_expected or cls == "journal":
        raise _fail(ErrorCode.BAD_REQUEST, "deadlineMs is required for a call; send a budget in ms")
    target = None
    if o.get("target") is not None:
        t = _record(o["target"], "target")
        revision = t.get("mappingRevision")
        target = Target(
            _token(t.get("owner"), OWNER_OR_ACTOR, "target.owner", "[A-Za-z0-9_]{1,64}"),
            _token(t.get("actor"), OWNER_OR_ACTOR, "target.actor", "[A-Za-z0-9_]{1,64}"),
            _token(t.get("lifecycleUid"), LIFECYCLE_UID, "target.lifecycleUid", "[a-z0-9]{26,32}"),
            None if revision is None else _uint(revision, "target.mappingRevision"),
        )
    bind = None
    if o.get("bind") is not None:
        if command == "describe":
            raise _fail(
                ErrorCode.BAD_REQUEST, "describe carries no bind (it produces one); drop the bind"
            )
        b = _record(o["bind"], "bind")
        bind = _checked_bind(b.get("instanceId"), b.get("epoch"))
    args = o.get("args")
    if args is not None:
        args = _record(args, "args")
    sender = _record(o.get("from"), "from")
    from_id = _checked_sender(sender.get("id"), sender.get("name"))
    return Request(
        request_id,
        endpoint,
        token,
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


# The parts of an envelope that repeat from request to request (the op, the bind, the
# sender) are checked once per distinct value and remembered; a refusal raises and is
# never remembered. ``typed`` keeps ``True`` apart from ``1`` and ``1.0`` from ``1``; only
# short strings and plain integers are remembered, so the memory stays bounded.
_remembered = functools.lru_cache(maxsize=4096, typed=True)
_REMEMBERED_CHARS = 256


def _hashable(*values: Any) -> bool:
    for value in values:
        kind = type(value)
        if kind is str:
            if len(value) > _REMEMBERED_CHARS:
                return False
        elif kind is not int and value is not None:
            return False
    return True


def _checked_op(
    endpoint: Any, command: Any, input_digest: Any, output_digest: Any
) -> tuple[str, str, str, str | None, str | None]:
    """``op``'s endpoint, its token, the command and the two digests, checked in order."""
    if _hashable(endpoint, command, input_digest, output_digest):
        return _op_remembered(endpoint, command, input_digest, output_digest)
    return _op(endpoint, command, input_digest, output_digest)


def _op(
    endpoint: Any, command: Any, input_digest: Any, output_digest: Any
) -> tuple[str, str, str, str | None, str | None]:
    endpoint = _text(endpoint, "op.endpoint")
    try:
        token = endpoint_token(endpoint)
    except ContractError as exc:
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"op.endpoint {preview(endpoint)} is not an endpoint name; send dot-separated "
            "labels of [a-z0-9-] whose token fits 64 characters, as describe names it",
        ) from exc
    command = _token(command, COMMAND_TOKEN, "op.command", "[a-z0-9-]{1,32}")
    return (
        endpoint,
        token,
        command,
        _digest(input_digest, "inputDigest", command),
        _digest(output_digest, "outputDigest", command),
    )


_op_remembered = _remembered(_op)


def _digest(value: Any, key: str, command: str) -> str | None:
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
        return None
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise _fail(
            ErrorCode.BAD_REQUEST,
            f"op.{key} {preview(value)} is not a sha256:<64 hex> digest; send the digest "
            "the command's row in the describe answer names",
        )
    return value


def _checked_bind(instance_id: Any, epoch: Any) -> Bind:
    if _hashable(instance_id, epoch):
        return _bind_remembered(instance_id, epoch)
    return _bind(instance_id, epoch)


def _bind(instance_id: Any, epoch: Any) -> Bind:
    return Bind(
        _token(instance_id, LIFECYCLE_UID, "bind.instanceId", "[a-z0-9]{26,32}"),
        _uint(epoch, "bind.epoch"),
    )


_bind_remembered = _remembered(_bind)


def _checked_sender(sender_id: Any, name: Any) -> str:
    """``from.id``, once ``from.id`` and ``from.name`` are both non-empty strings."""
    if _hashable(sender_id, name):
        return _sender_remembered(sender_id, name)
    return _sender(sender_id, name)


def _sender(sender_id: Any, name: Any) -> str:
    checked = _text(sender_id, "from.id")
    _text(name, "from.name")
    return checked


_sender_remembered = _remembered(_sender)


def check_agreement(request: Request, subject: RequestSubject) -> None:
    """The body must agree with the broker-authenticated subject."""
    if request.endpoint_token != subject.endpoint_token:
        raise _fail(
            ErrorCode.OP_MISMATCH,
            f"op.endpoint {preview(request.endpoint)} does not agree with the subject's "
            "endpoint; send the endpoint name the subject addresses",
        )
    if request.command != subject.command:
        raise _fail(
            ErrorCode.OP_MISMATCH,
            f"op.command {preview(request.command)} does not agree with the subject's "
            f"{preview(subject.command)}; name the same command in both",
        )
    if subject.route == "all" and request.deadline_ms is None:
        raise _fail(
            ErrorCode.BAD_REQUEST, "deadlineMs is required on the scatter rail; send a budget"
        )
    if request.bind is not None:
        if subject.route == "all":
            raise _fail(
                ErrorCode.BAD_REQUEST,
                "a bind on the scatter rail has no coherent reading; drop the bind, or send on "
                "the one or inst rail",
            )
        if subject.route == "inst" and request.bind.instanceId != subject.instance_id:
            raise _fail(
                ErrorCode.BAD_REQUEST,
                "bind.instanceId contradicts the instance the inst-rail subject names; bind "
                "to the instance the subject addresses",
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
                f"the {subject.mode} form needs a body target; send target with owner, actor "
                "and lifecycleUid",
            )
        if request.target.owner != subject.target_owner:
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                "target.owner does not equal the subject's target owner token; send the same "
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
            raise _fail(
                ErrorCode.TARGET_MISMATCH,
                f"in {subject.mode} mode the body target must equal the subject's target "
                "triple; send the same seat in both",
            )
    sender = subject.caller.principal
    if request.from_id != sender:
        raise _fail(
            ErrorCode.SENDER_MISMATCH,
            f"from.id {preview(request.from_id)} does not equal the subject's sender "
            f"{sender}; send from.id as the principal your credential publishes as",
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
