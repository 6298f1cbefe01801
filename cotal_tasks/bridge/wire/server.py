"""Serve one endpoint's commands on the Cotal wire.

Per message, in the order ``serveEndpoint`` uses: parse the subject (a subject that fits
no shape is dropped unanswered), parse the envelope, check subject agreement, class,
digests, the bind fence, mode admission, the args schema and target currency; run the
handler; check the output schema; publish the reply on the subject derived from the
request (never ``msg.reply``).

A cast (``replyExpected: false``) is never answered, not even with an error: the verb is
read from the decoded body before the envelope is parsed, so a malformed cast is as silent
as a valid one. (Cotal's ``serveEndpoint`` answers a body whose envelope does not parse;
the wire rule is stricter, and this follows the rule.) Every other request on a subject
that parses is answered: a refusal before the handler says ``not-executed``, and a reply
that would not fit the broker's payload limit is replaced by a short error that does.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema_rs
import orjson
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from cotal_tasks.bridge.service.commands import Call, CommandService, PresenceSource
from cotal_tasks.bridge.service.validation import args_refusal
from cotal_tasks.bridge.wire import envelope
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.resume import resumed
from cotal_tasks.bridge.wire.space import LifecycleHeads
from cotal_tasks.bridge.wire.subjects import (
    RequestSubject,
    event_subject,
    parse_request,
    reply_subject,
    serve_filters,
)
from cotal_tasks.core import (
    BOARD_CHANGED_TOPIC,
    COMMANDS,
    ContractError,
    ErrorCode,
    Seat,
    contract_artifacts,
    endpoint_token,
    json_schema,
)
from cotal_tasks.core.commands import mode_refusal
from cotal_tasks.core.errors import Outcome
from cotal_tasks.providers.store import deadline_at

log = logging.getLogger(__name__)

TargetCheck = Literal["lifecycle", "presence", "none"]
DESCRIBE = "describe"
BIND_REFUSED = "ai.cotal.ep.bind-refused"
MAX_IN_FLIGHT = 256
# Served inline until they first wait (see ``_receive``): the reads, and describe.
_INLINE = frozenset({DESCRIBE, *(name for name, spec in COMMANDS.items() if spec.effect == "read")})


@dataclass(frozen=True, slots=True)
class _Contract:
    input_digest: str
    output_digest: str
    args: Any  # the compiled jsonschema_rs validator of the input schema


def _contracts() -> dict[str, _Contract]:
    artifacts = contract_artifacts()
    return {
        name: _Contract(
            artifacts.inputs[name].digest,
            artifacts.outputs[name].digest,
            jsonschema_rs.validator_for(json_schema(spec.input)),
        )
        for name, spec in COMMANDS.items()
    }


@dataclass
class EndpointServer:
    """One instance of one endpoint on one NATS connection."""

    nc: NATS
    space: str
    endpoint: str
    owner: str
    identity: InstanceIdentity
    service: CommandService
    presence: PresenceSource
    lifecycle: LifecycleHeads | None
    target_check: TargetCheck = "lifecycle"
    on_served: Callable[[str, str, float], None] | None = None
    _token: str = field(init=False)
    _contracts: dict[str, _Contract] = field(init=False)
    _subs: list[Subscription] = field(default_factory=list, init=False)
    _pending: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_IN_FLIGHT))

    def __post_init__(self) -> None:
        self._token = endpoint_token(self.endpoint)
        self._contracts = _contracts()

    @property
    def token(self) -> str:
        """The endpoint's subject token."""
        return self._token

    def describe_answer(self) -> dict[str, Any]:
        return {
            "public": True,
            "descriptor": {
                "endpoint": self.endpoint,
                "owner": self.owner,
                "protocol": {"v": 1},
                "clusters": [
                    {"digest": contract_artifacts().cluster.digest, "commands": list(COMMANDS)}
                ],
            },
        }

    async def start(self) -> None:
        commands = (*COMMANDS, DESCRIBE)
        for flt in serve_filters(self.space, self._token, self.identity.instance_id, commands):
            sub = await self.nc.subscribe(flt.subject, queue=flt.queue or "", cb=self._receive)
            self._subs.append(sub)

    async def stop(self) -> None:
        """Stop taking requests, then let every in-flight one finish and reply."""
        # drain, not unsubscribe: requests already delivered to this instance are still
        # handled and answered; only new ones go to the rest of the queue group.
        for sub in self._subs:
            await sub.drain()  # type: ignore[no-untyped-call]  # nats-py leaves it untyped
        self._subs.clear()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def publish_board_changed(self, change_seq: int, observed_at: int) -> None:
        """``board-changed`` on this instance's event subject; the composition root attaches
        it to the service's change listeners."""
        event = {
            "v": 1,
            "topic": BOARD_CHANGED_TOPIC,
            "ts": observed_at,
            "data": {"changeSeq": change_seq, "observedAt": observed_at},
        }
        subject = event_subject(
            self.space, self._token, self.identity.instance_id, self.identity.epoch
        )
        await self.nc.publish(subject, orjson.dumps(event))

    async def _receive(self, msg: Msg) -> None:
        """Handle ``msg``: a read here, until it first waits; anything else in a task.

        A read the cache answers never waits, so it is served inline without the cost of
        a task; a read that does wait (the database, a presence lookup) goes on in a task
        of its own from there, so the subscription's next message is not held behind it.
        A write gets its task up front: it may enter a scope bound to the running task
        (an HTTP client's cancel scope, on a hosted endpoint) before it first waits.
        """
        subject = parse_request(msg.subject, self.space)
        if subject is None or subject.endpoint_token != self._token:
            return  # fits no shape: never handled, never answered
        await self._slots.acquire()
        handling = self._handle(msg, subject)
        if subject.command not in _INLINE:
            self._track(asyncio.create_task(handling))
            return
        context = contextvars.copy_context()  # its own, as a task would have
        try:
            waiting = context.run(handling.send, None)
        except StopIteration:
            self._slots.release()
            return
        except BaseException:
            self._slots.release()
            log.exception("request handling failed")
            return
        self._track(asyncio.create_task(resumed(handling, waiting), context=context))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._pending.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("request handling failed", exc_info=task.exception())

    async def _handle(self, msg: Msg, subject: RequestSubject) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        raw: Any = None
        try:
            raw = orjson.loads(msg.data)
        except orjson.JSONDecodeError as exc:
            reply = envelope.error_reply("invalid", _not_json(exc))
        else:
            cast = envelope.is_cast(raw)
            reply = await self._answer(subject, raw, started)
            if cast:
                return  # a cast is never answered, not even with an error
        if self.on_served is not None:
            code = "ok" if reply["ok"] else str(reply["error"]["code"])
            self.on_served(subject.command, code, loop.time() - started)
        target = reply_subject(self.space, subject, self.identity.instance_id, self.identity.epoch)
        await self.nc.publish(target, self._encode(reply))

    async def _answer(self, subject: RequestSubject, raw: Any, received: float) -> dict[str, Any]:
        """Parse, admit and serve one decoded body (received at loop time ``received``, so
        a write answers by its ``deadlineMs``); return its reply envelope."""
        started = False  # whether the command may have begun: an internal error says so
        try:
            request = envelope.parse_request(raw)
            started = True
            budget = request.deadline_ms
            with deadline_at(None if budget is None else received + budget / 1000):
                data = await self._dispatch(subject, request)
            return envelope.ok_reply(request.id, data)
        except ContractError as exc:
            return envelope.error_reply(envelope.request_id_of(raw), exc)
        except Exception as exc:
            log.exception("internal error serving %s", subject.command)
            return envelope.error_reply(
                envelope.request_id_of(raw),
                ContractError(
                    ErrorCode.INTERNAL,
                    f"the bridge failed unexpectedly ({type(exc).__name__}); retry, and "
                    "report it if it persists",
                    outcome="unknown" if started else "not-executed",
                ),
            )

    def _encode(self, reply: dict[str, Any]) -> bytes:
        """The reply's bytes, replaced by a short error when they would not fit the broker."""
        data = orjson.dumps(reply)
        limit = self.nc.max_payload or len(data)
        if len(data) <= limit:
            return data
        outcome: Outcome = "executed" if reply["ok"] else reply["error"]["outcome"]
        log.error("a %d-byte reply exceeds the %d-byte payload limit", len(data), limit)
        error = ContractError(
            ErrorCode.RESOURCE_EXHAUSTED,
            f"the reply is {len(data)} bytes, over the broker's {limit}-byte payload limit; "
            "ask for less (a smaller list limit), and report it if it persists",
            outcome=outcome,
        )
        return orjson.dumps(envelope.error_reply(str(reply["id"]), error))

    async def _dispatch(self, subject: RequestSubject, request: envelope.Request) -> Any:
        try:
            self._admit(subject, request)
            # an untargeted request has no body target (check_agreement saw to it)
            target = None if subject.mode is None else await self._current_target(subject, request)
        except ContractError as exc:
            raise exc.with_outcome("not-executed") from None
        except Exception as exc:
            log.exception("internal error admitting %s", request.command)
            raise ContractError(
                ErrorCode.INTERNAL,
                f"the bridge failed checking the request ({type(exc).__name__}) before "
                "serving it; retry, and report it if it persists",
                outcome="not-executed",
            ) from exc
        if request.command == DESCRIBE:
            return self.describe_answer()
        # The answer is built from validated models or the board's stored (validated) wire
        # form, so it is not checked against the output schema again here; the tests hold
        # every command's reply to the published output schema.
        return await self.service.handle(
            Call(
                command=request.command,
                caller=subject.caller,
                envelope_id=request.id,
                args=request.args,
                mode=subject.mode,  # type: ignore[arg-type]
                target=target,
            )
        )

    def _admit(self, subject: RequestSubject, request: envelope.Request) -> None:
        """Every check before the effect but the target's currency."""
        envelope.check_agreement(request, subject)
        if request.cls != "ephemeral":
            raise _refused(
                ErrorCode.CLASS_MISMATCH,
                f"class {request.cls!r} does not equal the command's contract class "
                "'ephemeral'; send class ephemeral",
            )
        if request.command == DESCRIBE:
            self._check_describe(subject, request)
            return
        contract = self._contracts.get(request.command)
        if contract is None:
            raise _refused(
                ErrorCode.UNIMPLEMENTED,
                f"this endpoint serves no command {request.command!r}; describe lists them",
            )
        if (request.input_digest, request.output_digest) != (
            contract.input_digest,
            contract.output_digest,
        ):
            raise _refused(
                ErrorCode.CONTRACT_MISMATCH,
                f"the pinned digests do not match the served {request.command} contract; "
                "describe the endpoint again and pin the digests it names",
            )
        self._check_bind(request)
        spec = COMMANDS[request.command]
        refusal = mode_refusal(
            request.command,
            spec.modes,
            subject.mode or None,
            target_given=request.target is not None,
        )
        if refusal is not None:
            raise _refused(refusal.code, refusal.message)
        if not contract.args.is_valid(request.args):
            raise _refused(ErrorCode.BAD_REQUEST, args_refusal(request.command, request.args))

    def _check_describe(self, subject: RequestSubject, request: envelope.Request) -> None:
        if subject.mode is not None:
            raise _refused(ErrorCode.PERMISSION_DENIED, "describe is untargeted; send no target")
        if request.args is not None:
            raise _refused(ErrorCode.BAD_REQUEST, "describe takes no args; send none")

    def _check_bind(self, request: envelope.Request) -> None:
        bind = request.bind
        if bind is None:
            return
        if (bind.instanceId, bind.epoch) == (self.identity.instance_id, self.identity.epoch):
            return
        same_instance = bind.instanceId == self.identity.instance_id
        detail = {
            "kind": BIND_REFUSED,
            "endpoint": self.endpoint,
            "command": request.command,
            "boundTo": {"instanceId": bind.instanceId, "epoch": bind.epoch},
            "servedBy": {"instanceId": self.identity.instance_id, "epoch": self.identity.epoch},
        }
        raise ContractError(
            ErrorCode.EXPIRED if same_instance else ErrorCode.FAILED_PRECONDITION,
            (
                "the bound incarnation has restarted"
                if same_instance
                else "this request is bound to another instance of the endpoint"
            )
            + "; describe the endpoint again and re-issue",
            outcome="not-executed",
            details=(detail,),
        )

    async def _current_target(
        self, subject: RequestSubject, request: envelope.Request
    ) -> Seat | None:
        if subject.mode == "self":
            return subject.caller
        t = request.target
        if t is None:
            return None
        seat = Seat(t.owner, t.actor, t.lifecycleUid)
        if self.target_check == "lifecycle":
            if self.lifecycle is None:
                raise _refused(
                    ErrorCode.UNAVAILABLE,
                    "no trusted lifecycle reader is configured; targeted commands are refused",
                )
            mapping = await self.lifecycle.current(t.owner, t.actor)
            if mapping is None or mapping.state != "active":
                raise _refused(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} has no active lifecycle mapping; check the seat "
                    "is running, then retry with its current lifecycle uid",
                )
            if mapping.lifecycle_uid != t.lifecycleUid:
                raise _refused(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} is now lifecycle {mapping.lifecycle_uid}, not "
                    f"{t.lifecycleUid}; retry with the current uid",
                )
            if t.mappingRevision is not None and t.mappingRevision != mapping.mapping_revision:
                raise _refused(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} mapping is at revision {mapping.mapping_revision}, "
                    f"not the pinned {t.mappingRevision}; re-read it and retry",
                )
        elif self.target_check == "presence":
            card = await self.presence.lookup(t.owner, t.actor)
            if card is None or not card.fresh or card.lifecycleUid != t.lifecycleUid:
                raise _refused(
                    ErrorCode.EXPIRED,
                    f"target {seat} has no fresh presence card with that lifecycle uid "
                    "(target_check = presence); start the seat or check the triple",
                )
        return seat


def _not_json(exc: orjson.JSONDecodeError) -> ContractError:
    reason = "it nests too deeply" if "recursion" in str(exc) else "it is not JSON"
    return ContractError(
        ErrorCode.BAD_REQUEST,
        f"the request body does not decode ({reason}); send a Cotal request envelope, a "
        "JSON object of UTF-8 text",
        outcome="not-executed",
    )


def _refused(code: ErrorCode, message: str) -> ContractError:
    return ContractError(code, message, outcome="not-executed")
