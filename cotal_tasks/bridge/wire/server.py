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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from cotal_tasks.bridge.logs import log_context
from cotal_tasks.bridge.service.commands import Call, CommandService, PresenceSource
from cotal_tasks.bridge.wire import envelope
from cotal_tasks.bridge.wire.admission import DESCRIBE, Admission, TargetCheck, contracts
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.resume import resumed
from cotal_tasks.bridge.wire.space import LifecycleHeads
from cotal_tasks.bridge.wire.subjects import (
    RequestSubject,
    event_subject,
    parse_request,
    reply_head,
    serve_filters,
)
from cotal_tasks.core import (
    BOARD_CHANGED_TOPIC,
    COMMANDS,
    ContractError,
    ErrorCode,
    contract_artifacts,
    endpoint_token,
)
from cotal_tasks.core.ceiling import max_request_bytes
from cotal_tasks.core.errors import Outcome
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
# An oversize body stating ``replyExpected: false``, found without decoding it (a quote
# inside a string is escaped, so only a key matches).
_CAST = re.compile(rb'"replyExpected"\s*:\s*false')
_INLINE = frozenset({DESCRIBE, *(name for name, spec in COMMANDS.items() if spec.effect == "read")})


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
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_IN_FLIGHT))
    # The newest change not yet announced (changeSeq, observedAt), and its publisher.
    _event_due: tuple[int, int] | None = field(default=None, init=False)
    _event_task: asyncio.Task[None] | None = field(default=None, init=False)
    # The loop it serves on, taken in ``start``: ``asyncio.get_running_loop`` costs a
    # ``getpid`` system call on every call (CPython 3.11 checks the pid), once a request.
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._token = endpoint_token(self.endpoint)
        self._max_request = max_request_bytes()
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
        if self._event_task is not None:  # the wake of the last writes still goes out
            await asyncio.gather(self._event_task, return_exceptions=True)

    async def publish_board_changed(self, change_seq: int, observed_at: int) -> None:
        """``board-changed`` on this instance's event subject; the composition root attaches
        it to the service's change listeners.

        The event is a wake, never a feed (the contract, section 5): changes committed
        together (one group commit's batch, answered in one turn of the event loop) wake
        readers once, with the newest ``changeSeq``, published on the next turn. A write
        is answered without waiting for it.
        """
        due = self._event_due
        self._event_due = (change_seq if due is None else max(change_seq, due[0]), observed_at)
        if due is None:
            self._event_task = asyncio.create_task(self._publish_due())

    async def _publish_due(self) -> None:
        due, self._event_due = self._event_due, None
        if due is None:
            return
        change_seq, observed_at = due
        event = {
            "v": 1,
            "topic": BOARD_CHANGED_TOPIC,
            "ts": observed_at,
            "data": {"changeSeq": change_seq, "observedAt": observed_at},
        }
        subject = event_subject(
            self.space, self._token, self.identity.instance_id, self.identity.epoch
        )
        try:
            await self.nc.publish(subject, orjson.dumps(event))
        except Exception:  # a wake that cannot be sent must never undo a committed write
            log.exception("board-changed for changeSeq %d was not published", change_seq)

    async def _receive(self, msg: Msg) -> None:
        """Handle ``msg``: a read here, until it first waits; anything else in a task.

        A read the cache answers never waits, so it is served inline without the cost of
        a task; a read that does wait (the database, a presence lookup) goes on in a task
        of its own from there, so the subscription's next message is not held behind it.
        A write gets its task up front: it may enter a scope bound to the running task
        (an HTTP client's cancel scope, on a hosted endpoint) before it first waits.
        Only what is in flight holds one of the ``MAX_IN_FLIGHT`` slots: a task, or a read
        from its first wait on; a read served inline is done before anything could queue.
        """
        subject = parse_request(msg.subject, self.space)
        if subject is None or subject.endpoint_token != self._token:
            return  # fits no shape: never handled, never answered
        handling = self._handle(msg, subject)
        if subject.command not in _INLINE:
            try:
                await self._slots.acquire()
            except BaseException:
                handling.close()
                raise
            self._track(asyncio.create_task(handling))
            return
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

    async def _handle(self, msg: Msg, subject: RequestSubject) -> None:
        loop = self._loop or asyncio.get_running_loop()
        started = loop.time()
        if len(msg.data) > self._max_request:  # never decoded: it cannot be a valid request
            if _CAST.search(msg.data):
                return  # what reads as a cast is never answered, even oversize
            reply = envelope.error_reply("invalid", _oversize(len(msg.data), self._max_request))
        else:
            try:
                raw = orjson.loads(msg.data)
            except orjson.JSONDecodeError as exc:
                reply = envelope.error_reply("invalid", _not_json(exc))
            else:
                cast = envelope.is_cast(raw)
                reply = await self._answer(subject, raw, started)
                if cast:
                    return  # a cast is never answered, not even with an error
        code = "ok" if reply["ok"] else str(reply["error"]["code"])
        if self.on_served is not None:
            self.on_served(subject.command, code, loop.time() - started)
        if reply["ok"]:
            log.debug("answered %s: %s", subject.command, code)
        else:
            self._log_error_reply(subject, reply)
        await self.nc.publish(self._reply_head(subject) + subject.nonce, self._encode(reply))

    async def _answer(self, subject: RequestSubject, raw: Any, received: float) -> dict[str, Any]:
        """Parse, admit and serve one decoded body (received at loop time ``received``, so
        a write answers by its ``deadlineMs``); return its reply envelope."""
        started = False  # whether the command may have begun: an internal error says so
        try:
            request = envelope.parse_request(raw)
            log_context(endpoint=self.endpoint, command=request.command, envelope_id=request.id)
            started = True
            call = self._admission.admitted(subject, request)
            if not isinstance(call, Call):
                call = await call  # a target whose currency is looked up
            if request.command == DESCRIBE:
                data: Any = self.describe_answer()
            elif request.command in _INLINE:  # a read waits on no tracker: it has no deadline
                data = await self.service.handle(call)
            else:
                budget = request.deadline_ms
                with deadline_at(None if budget is None else received + budget / 1000):
                    data = await self.service.handle(call)
            return envelope.ok_reply(request.id, data)
        except ContractError as exc:
            return envelope.error_reply(envelope.request_id_of(raw), exc)
        except Exception as exc:
            log.exception("internal error serving %s", subject.command)
            return envelope.error_reply(
                envelope.request_id_of(raw),
                ContractError(
                    ErrorCode.INTERNAL,
                    f"the bridge failed unexpectedly ({type(exc).__name__}). Retry, and "
                    "report it if it persists",
                    outcome="unknown" if started else "not-executed",
                ),
            )

    def _log_error_reply(self, subject: RequestSubject, reply: dict[str, Any]) -> None:
        """A refusal at info, a failure (the bridge's or its store's) at warning: one line
        with the endpoint, the command and the envelope id (``invalid`` when the request
        had none)."""
        error = reply["error"]
        log_context(endpoint=self.endpoint, command=subject.command, envelope_id=reply["id"])
        failed = error["code"] in _FAILURES
        log.log(
            logging.WARNING if failed else logging.INFO,
            "%s %s: %s (%s): %s",
            "failed" if failed else "refused",
            subject.command,
            error["code"],
            error["outcome"],
            error["message"],
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
            f"the reply is {len(data)} bytes, over the broker's {limit}-byte payload limit. "
            "Ask for less (a smaller list limit), and report it if it persists",
            outcome=outcome,
        )
        return orjson.dumps(envelope.error_reply(str(reply["id"]), error))


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
