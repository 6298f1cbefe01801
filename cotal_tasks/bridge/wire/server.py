"""Serve one endpoint's commands on the Cotal wire.

Per message, in the order ``serveEndpoint`` uses: parse the subject (a subject that fits
no shape is dropped unanswered), parse the envelope, check subject agreement, class,
digests, the bind fence, mode admission, the args schema and target currency; run the
handler; check the output schema; publish the reply on the subject derived from the
request (never ``msg.reply``).

A body larger than the contract's largest valid request (``core.ceiling``) is refused
``bad-request`` before it is decoded. A cast (``replyExpected: false``) is never answered,
not even with an error: the verb is read from the decoded body before the envelope is
parsed (from the raw bytes of an oversize one), so a malformed cast is as silent as a
valid one. (Cotal's ``serveEndpoint`` answers a body whose envelope does not parse;
the wire rule is stricter, and this follows the rule.) Every other request on a subject
that parses is answered: a refusal before the handler says ``not-executed``, and a reply
that would not fit the broker's payload limit is replaced by a short error that does.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from cotal_tasks.bridge.logs import log_context
from cotal_tasks.bridge.service.commands import Call, CommandService, PresenceSource
from cotal_tasks.bridge.wire import envelope
from cotal_tasks.bridge.wire.admission import DESCRIBE, Admission, TargetCheck, contracts
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.replies import Serialised, encode
from cotal_tasks.bridge.wire.resume import resumed
from cotal_tasks.bridge.wire.space import LifecycleHeads
from cotal_tasks.bridge.wire.subjects import (
    RequestSubject,
    event_subject,
    parse_request,
    reply_head,
    serve_filters,
)
from cotal_tasks.bridge.wire.wake import Wakes
from cotal_tasks.core import (
    COMMANDS,
    ContractError,
    ErrorCode,
    contract_artifacts,
    endpoint_token,
)
from cotal_tasks.core.ceiling import max_request_bytes
from cotal_tasks.providers.store import deadline_at

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 256
# Each subscription's backlog in the bridge, in messages and bytes: past either, nats-py
# drops the message (and says so once as a slow consumer) instead of growing without bound.
PENDING_MSGS = 8192
PENDING_BYTES = 16 * 1024 * 1024
_REPLY_HEADS_KEPT = 4096
# Served inline until they first wait (see ``_receive``): the reads, and describe.
# Codes that say the bridge (or its store, its tracker) failed, not that the call was wrong.
_FAILURES = frozenset(
    code.value
    for code in (
        ErrorCode.INTERNAL,
        ErrorCode.UNAVAILABLE,
        ErrorCode.DEADLINE_EXCEEDED,
        ErrorCode.RESOURCE_EXHAUSTED,
    )
)
_GET_TASK = "get-task"
_INLINE = frozenset({DESCRIBE, *(name for name, spec in COMMANDS.items() if spec.effect == "read")})


@dataclass(slots=True)
class _Begun:
    """How far a request got before it had to wait: received at loop time ``received``,
    decoded to ``raw``, and where they were reached, its envelope and its admitted call
    (or what finds it)."""

    received: float
    raw: Any
    request: envelope.Request | None = None
    call: Call | Coroutine[Any, Any, Call] | None = None


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
    _admission: Admission = field(init=False)
    # A body over the contract's largest valid request is refused before it is decoded.
    _max_request: int = field(init=False)
    _subs: list[Subscription] = field(default_factory=list, init=False)
    _pending: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _reply_heads: dict[str, str] = field(default_factory=dict, init=False)
    _serialised: Serialised = field(default_factory=Serialised, init=False)
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_IN_FLIGHT))
    _wakes: Wakes = field(init=False)
    # The loop it serves on, taken in ``start``: ``asyncio.get_running_loop`` costs a
    # ``getpid`` system call on every call (CPython 3.11 checks the pid), once a request.
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._token = endpoint_token(self.endpoint)
        self._max_request = max_request_bytes()
        identity = self.identity
        self._wakes = Wakes(
            self.nc, event_subject(self.space, self._token, identity.instance_id, identity.epoch)
        )
        self._admission = Admission(
            self.endpoint,
            self.identity,
            self.presence,
            self.lifecycle,
            self.target_check,
            contracts(),
        )

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
        self._loop = asyncio.get_running_loop()
        commands = (*COMMANDS, DESCRIBE)
        for flt in serve_filters(self.space, self._token, self.identity.instance_id, commands):
            sub = await self.nc.subscribe(
                flt.subject,
                queue=flt.queue or "",
                cb=self._receive,
                pending_msgs_limit=PENDING_MSGS,
                pending_bytes_limit=PENDING_BYTES,
            )
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
        await self._wakes.settled()  # the wake of the last writes still goes out

    async def publish_board_changed(self, change_seq: int, observed_at: int) -> None:
        """``board-changed`` on this instance's event subject (``wake.Wakes``); the
        composition root attaches it to the service's change listeners."""
        self._wakes.changed(change_seq, observed_at)

    async def _receive(self, msg: Msg) -> None:
        """Handle ``msg``: a read here, until it first waits; anything else in a task.

        A read is answered in this call when nothing it needs waits (``_read_now``: the
        store holds the task, the target needs no lookup), without a coroutine or a
        context of its own; a read that does wait (the database, a presence lookup) goes
        on in a task of its own from where it stopped, so the subscription's next
        message is not held behind it and nothing is decoded or checked twice.
        A write gets its task up front: it may enter a scope bound to the running task
        (an HTTP client's cancel scope, on a hosted endpoint) before it first waits.
        Only what is in flight holds one of the ``MAX_IN_FLIGHT`` slots: a task, or a read
        from its first wait on; a read served inline is done before anything could queue.
        """
        subject = parse_request(msg.subject, self.space)
        if subject is None or subject.endpoint_token != self._token:
            return  # fits no shape: never handled, never answered
        if subject.command not in _INLINE:
            handling = self._handle(msg.data, subject)
            try:
                await self._slots.acquire()
            except BaseException:
                handling.close()
                raise
            self._track(asyncio.create_task(handling))
            return
        try:
            step = self._read_now(msg.data, subject)
            if isinstance(step, bytes):
                await self.nc.publish(self._reply_head(subject) + subject.nonce, step)
                return
        except Exception:
            log.exception("request handling failed")
            return
        if step is None:
            return  # an oversize cast: never answered
        handling = self._handle(msg.data, subject, step)
        context = contextvars.copy_context()  # its own, as a task would have
        try:
            waiting = context.run(handling.send, None)
        except StopIteration:
            return
        except BaseException:
            log.exception("request handling failed")
            return
        try:
            await self._slots.acquire()  # in flight from here: wait for a slot like a task
        except BaseException:
            handling.close()  # a read has no effect to leave half done
            raise
        self._track(asyncio.create_task(resumed(handling, waiting), context=context))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._pending.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("request handling failed", exc_info=task.exception())

    def _read_now(self, data: bytes, subject: RequestSubject) -> bytes | _Begun | None:
        """A read's reply, when every step of it can be taken without waiting; else how
        far it got (``_Begun``), for ``_handle`` to go on from there.

        The same steps in the same order as ``_handle`` and ``_answer`` (decode, the
        envelope, admission, the answer), so the reply is the one they would give; a
        refusal is answered here. Nothing here binds the log context: the lines it logs
        name the request themselves.
        """
        received = self._loop.time() if self._loop is not None else 0.0
        decoded, raw = envelope.decode(data, self._max_request)
        if not decoded:
            return None if raw is None else self._reply(subject, raw, received)
        if envelope.is_cast(raw):
            return _Begun(received, raw)  # never answered: served on the full path
        started = False
        try:
            request = envelope.parse_request(raw)
            started = True
            call = self._admission.admitted(subject, request)
            if not isinstance(call, Call):
                return _Begun(received, raw, request, call)
            if request.command == DESCRIBE:
                answer: Any = self.describe_answer()
            else:
                answer = self.service.answer_now(call)
                if answer is None:
                    return _Begun(received, raw, request, call)
                if request.command == _GET_TASK:
                    answer = self._serialised.task(answer)
            reply = envelope.ok_reply(request.id, answer)
        except ContractError as exc:
            reply = envelope.error_reply(envelope.request_id_of(raw), exc)
        except Exception as exc:
            reply = self._internal_error(subject, raw, exc, started=started)
        return self._reply(subject, reply, received)

    async def _handle(
        self, data: bytes, subject: RequestSubject, begun: _Begun | None = None
    ) -> None:
        """Serve one request to its reply, or on from where ``_read_now`` stopped."""
        if begun is None:
            received = self._loop.time() if self._loop is not None else 0.0
            decoded, raw = envelope.decode(data, self._max_request)
            if not decoded:
                if raw is not None:
                    await self._publish(subject, self._reply(subject, raw, received))
                return
            begun = _Begun(received, raw)
        cast = envelope.is_cast(begun.raw)
        reply = await self._answer(subject, begun)
        if cast:
            return  # a cast is never answered, not even with an error
        await self._publish(subject, self._reply(subject, reply, begun.received))

    async def _answer(self, subject: RequestSubject, begun: _Begun) -> dict[str, Any]:
        """Parse, admit and serve one decoded body (received at loop time
        ``begun.received``, so a write answers by its ``deadlineMs``), from as far as
        ``begun`` got; return its reply envelope."""
        raw = begun.raw
        started = False  # whether the command may have begun: an internal error says so
        try:
            request = begun.request
            if request is None:
                request = envelope.parse_request(raw)
            log_context(endpoint=self.endpoint, command=request.command, envelope_id=request.id)
            started = True
            call = begun.call
            if call is None:
                call = self._admission.admitted(subject, request)
            if not isinstance(call, Call):
                call = await call  # a target whose currency is looked up
            if request.command == DESCRIBE:
                data: Any = self.describe_answer()
            elif request.command in _INLINE:  # a read waits on no tracker: it has no deadline
                data = await self.service.handle(call)
            else:
                budget = request.deadline_ms
                deadline = None if budget is None else begun.received + budget / 1000
                with deadline_at(deadline):
                    data = await self.service.handle(call)
            return envelope.ok_reply(request.id, data)
        except ContractError as exc:
            return envelope.error_reply(envelope.request_id_of(raw), exc)
        except Exception as exc:
            return self._internal_error(subject, raw, exc, started=started)

    def _internal_error(
        self, subject: RequestSubject, raw: Any, exc: Exception, *, started: bool
    ) -> dict[str, Any]:
        """The reply to a request the bridge failed serving, logged with its traceback."""
        request_id = envelope.request_id_of(raw)
        log.error(
            "internal error serving %s",
            subject.command,
            exc_info=exc,
            extra=self._about(subject.command, request_id),
        )
        return envelope.error_reply(
            request_id,
            ContractError(
                ErrorCode.INTERNAL,
                f"the bridge failed unexpectedly ({type(exc).__name__}). Retry, and "
                "report it if it persists",
                outcome="unknown" if started else "not-executed",
            ),
        )

    def _reply(self, subject: RequestSubject, reply: dict[str, Any], received: float) -> bytes:
        """Count, log and encode one reply to a request received at loop time ``received``."""
        ok = reply["ok"]
        if self.on_served is not None:
            code = "ok" if ok else str(reply["error"]["code"])
            loop = self._loop
            self.on_served(subject.command, code, (loop.time() if loop else received) - received)
        if not ok:
            self._log_error_reply(subject, reply)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("answered %s: ok", subject.command, extra=self._about(subject.command))
        return encode(reply, self.nc.max_payload)

    async def _publish(self, subject: RequestSubject, reply: bytes) -> None:
        await self.nc.publish(self._reply_head(subject) + subject.nonce, reply)

    def _about(self, command: str, envelope_id: str | None = None) -> dict[str, str]:
        """What a log line says it is about (``logs.log_context``'s fields), given with the
        line rather than bound, so a read served inline leaves the context as it was."""
        about = {"endpoint": self.endpoint, "command": command}
        if envelope_id is not None:
            about["envelope_id"] = envelope_id
        return about

    def _log_error_reply(self, subject: RequestSubject, reply: dict[str, Any]) -> None:
        """A refusal at info, a failure (the bridge's or its store's) at warning: one line
        with the endpoint, the command and the envelope id (``invalid`` when the request
        had none)."""
        error = reply["error"]
        failed = error["code"] in _FAILURES
        log.log(
            logging.WARNING if failed else logging.INFO,
            "%s %s: %s (%s): %s",
            "failed" if failed else "refused",
            subject.command,
            error["code"],
            error["outcome"],
            error["message"],
            extra=self._about(subject.command, str(reply["id"])),
        )

    def _reply_head(self, subject: RequestSubject) -> str:
        """The reply subject up to the nonce, kept per request subject head (a caller
        sends the same command over and over): derived once, never from ``msg.reply``."""
        head = self._reply_heads.get(subject.head)
        if head is None:
            identity = self.identity
            head = reply_head(self.space, subject, identity.instance_id, identity.epoch)
            if len(self._reply_heads) >= _REPLY_HEADS_KEPT:
                self._reply_heads.clear()
            self._reply_heads[subject.head] = head
        return head
