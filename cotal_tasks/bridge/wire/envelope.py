"""Request and reply envelopes (SPEC §13.3), checked in the order ``serveEndpoint`` uses.

``parse_request`` is the body half of the boundary (``unsupported-version`` before
anything else, then shape, digests presence, class/verb rules); ``check_agreement`` in
``admission`` is the subject half (``op-mismatch``, ``target-mismatch``,
``sender-mismatch``). Unknown fields are ignored, as the wire says.

Every refusal carries ``outcome: not-executed``, names the field and what is wrong with
it, shows at most a short preview of the refused value (``validation.preview``) and says
what to send instead. ``is_cast`` reads the verb before anything else is parsed: a body
whose ``replyExpected`` is ``false`` is a cast, and a cast is never answered, not even
when the rest of its envelope is malformed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import orjson

from cotal_tasks.bridge.service.validation import preview
from cotal_tasks.bridge.wire import values
from cotal_tasks.bridge.wire.values import record, token, uint
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.identity import ID_TOKEN, LIFECYCLE_UID, OWNER_OR_ACTOR

ENVELOPE_V = 1
MAX_MESSAGE = 1000  # characters of an error message on the wire
# An oversize body stating ``replyExpected: false``, found without decoding it (a quote
# inside a string is escaped, so only a key matches).
_CAST = re.compile(rb'"replyExpected"\s*:\s*false')


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
    # The remembered repeating part this request shares with others (the same object for
    # each of them), or None: what checks after the envelope may remember results by.
    shape: Request | None = None


def decode(data: bytes, max_bytes: int) -> tuple[bool, Any]:
    """A request body decoded once: ``(True, the decoded body)``, or ``(False, the refusal
    to answer)``, or ``(False, None)`` for an oversize body that reads as a cast (never
    answered). A body over ``max_bytes`` (the largest valid request) is refused without
    being decoded."""
    if len(data) > max_bytes:  # never decoded: it cannot be a valid request
        if _CAST.search(data):
            return False, None  # what reads as a cast is never answered, even oversize
        return False, error_reply("invalid", _oversize(len(data), max_bytes))
    try:
        return True, orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return False, error_reply("invalid", _not_json(exc))


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
    """The request envelope of a decoded body, or the first refusal in check order.

    The part that repeats from request to request (the op, class, verb, bind and sender)
    is checked in full once per distinct value and remembered; a request whose part is
    remembered has only the rest checked, in the same order, so the first refusal is the
    one the full check would raise. Every refusal says ``not-executed``.
    """
    try:
        return _request(raw)
    except ContractError as exc:
        exc.with_outcome("not-executed")
        raise


def _request(raw: Any) -> Request:
    key = _fixed_key(raw)
    try:
        fixed = None if key is None else _fixed.get(key)
    except TypeError:  # a value that cannot be a key (an object, an array): not remembered
        key = fixed = None
    if fixed is None:
        request = _parse(raw)
        if key is not None and _rememberable(key):
            if len(_fixed) >= _FIXED_KEPT:
                _fixed.clear()
            # What repeats, without what is the request's own (and may be large).
            shape = replace(request, id="", deadline_ms=None, target=None, args=None)
            _fixed[key] = request.shape = shape
        return request
    o: dict[str, Any] = raw
    request_id = _version_and_id(o)
    deadline_ms = _deadline(o.get("deadlineMs"), fixed.cls, fixed.reply_expected)
    target = _target(o.get("target"))
    args = o.get("args")
    if args is not None and type(args) is not dict:
        args = record(args, "args")
    return Request(
        request_id,
        fixed.endpoint,
        fixed.endpoint_token,
        fixed.command,
        fixed.input_digest,
        fixed.output_digest,
        fixed.cls,
        fixed.reply_expected,
        deadline_ms,
        target,
        fixed.bind,
        args,
        fixed.from_id,
        fixed,
    )


def _parse(raw: Any) -> Request:
    o = record(raw, "request")
    request_id = _version_and_id(o)
    op = record(o.get("op"), "op")
    endpoint, endpoint_tok, command, input_digest, output_digest = values.op(
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
    deadline_ms = _deadline(o.get("deadlineMs"), cls, reply_expected)
    target = _target(o.get("target"))
    bind = None
    if o.get("bind") is not None:
        if command == "describe":
            raise ContractError(
                ErrorCode.BAD_REQUEST, "describe carries no bind (it produces one). Drop the bind"
            )
        b = record(o["bind"], "bind")
        bind = Bind(*values.bind(b.get("instanceId"), b.get("epoch")))
    args = o.get("args")
    if args is not None:
        args = record(args, "args")
    sender = record(o.get("from"), "from")
    from_id = values.sender(sender.get("id"), sender.get("name"))
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


def _version_and_id(o: dict[str, Any]) -> str:
    version = o.get("v")
    if isinstance(version, bool) or version != ENVELOPE_V:
        raise ContractError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"request envelope version {preview(version)} is not {ENVELOPE_V}. Send v: 1",
        )
    return token(o.get("id"), ID_TOKEN, "id")


def _deadline(deadline: Any, cls: str, reply_expected: bool) -> int | None:
    if deadline is not None:
        deadline_ms = uint(deadline, "deadlineMs")
        if deadline_ms == 0:
            raise ContractError(
                ErrorCode.BAD_REQUEST, "deadlineMs is 0. Send a positive budget in milliseconds"
            )
        return deadline_ms
    if reply_expected or cls == "journal":
        raise ContractError(
            ErrorCode.BAD_REQUEST, "deadlineMs is required for a call. Send a budget in ms"
        )
    return None


def _target(value: Any) -> Target | None:
    if value is None:
        return None
    t = record(value, "target")
    revision = t.get("mappingRevision")
    return Target(
        token(t.get("owner"), OWNER_OR_ACTOR, "target.owner"),
        token(t.get("actor"), OWNER_OR_ACTOR, "target.actor"),
        token(t.get("lifecycleUid"), LIFECYCLE_UID, "target.lifecycleUid"),
        None if revision is None else uint(revision, "target.mappingRevision"),
    )


# The repeating part of a body, as a key: looked up before anything is checked, and
# remembered only once the whole body passed and each of its values is of the type the
# envelope defines there (a string, or None, short enough; a bool verb; an int epoch), so
# the memory stays bounded. A string equals no value of another type, so the strings need
# no check before the lookup; the verb and the epoch do (``True == 1 == 1.0``). A refusal
# raises before anything is remembered.
_fixed: dict[tuple[Any, ...], Request] = {}  # the repeating part, the rest left empty
_FIXED_KEPT = 4096
_REMEMBERED_CHARS = 256
_TEXTS = 7  # the strings that lead the key: op (four), class, from (two)


def _fixed_key(o: Any) -> tuple[Any, ...] | None:
    """The repeating part of a decoded body as a key, or ``None`` when it cannot be one (no
    object, or a verb, bind or epoch of another type); its strings are not checked here
    (``_rememberable``)."""
    if type(o) is not dict:
        return None
    op, sender = o.get("op"), o.get("from")
    if type(op) is not dict or type(sender) is not dict:
        return None
    verb = o.get("replyExpected")
    if verb is not True and verb is not False:
        return None
    bind = o.get("bind")
    if bind is None:
        instance_id = epoch = None
    elif type(bind) is dict:
        instance_id, epoch = bind.get("instanceId"), bind.get("epoch")
        if type(epoch) is not int:
            return None
    else:
        return None
    return (
        op.get("endpoint"),
        op.get("command"),
        op.get("inputDigest"),
        op.get("outputDigest"),
        o.get("class"),
        sender.get("id"),
        sender.get("name"),
        verb,
        bind is None,
        instance_id,
        epoch,
    )


def _rememberable(key: tuple[Any, ...]) -> bool:
    """Whether a key's strings are strings (or None) short enough to be remembered."""
    for text in (*key[:_TEXTS], key[9]):
        if text is not None and (type(text) is not str or len(text) > _REMEMBERED_CHARS):
            return False
    return True


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


def _oversize(size: int, bound: int) -> ContractError:
    return ContractError(
        ErrorCode.BAD_REQUEST,
        f"the request body is {size:,} bytes, over the {bound:,} bytes the largest valid "
        "ai.cotal.tasks request can take; it was not read. Send the envelope and args the "
        "command's input admits",
        outcome="not-executed",
    )


def _not_json(exc: orjson.JSONDecodeError) -> ContractError:
    reason = "it nests too deeply" if "recursion" in str(exc) else "it is not JSON"
    return ContractError(
        ErrorCode.BAD_REQUEST,
        f"the request body does not decode ({reason}). Send a Cotal request envelope, a "
        "JSON object of UTF-8 text",
        outcome="not-executed",
    )
