"""The untyped half of the client: describe the endpoint and invoke any command.

``Session.invoke_answer`` follows Cotal's ``invokeCommand``: the request pins the digests
of the resolved command row and binds the instance that answered the describe; a reply
must come from that incarnation (its subject says who answered), echo the request id and,
when ``ok``, fit the resolved output schema. A bind refusal is checked against what was
sent and, when it says the command did not run, the endpoint is described again and the
request re-issued (a first attempt, so safe for writes). A timeout re-sends the same
envelope id, which the contract makes idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nats.aio.client import Client as NATS

from cotal_tasks.client.contract import CommandContract, ContractStore, Service, resolve
from cotal_tasks.client.errors import TasksError, from_reply, usage_error
from cotal_tasks.client.refusals import args_refused
from cotal_tasks.client.subjects import CallerRail
from cotal_tasks.client.wire import Answer, carried, exchange, new_id, nonce
from cotal_tasks.core import ContractError, ErrorCode, Seat, endpoint_token
from cotal_tasks.core.commands import Mode, mode_refusal
from cotal_tasks.core.errors import BIND_REFUSED
from cotal_tasks.core.identity import ID_TOKEN

DESCRIBE_RETRY_S = 0.25
# How often a call refused by the bind fence is re-issued after a fresh describe. Each
# re-issue is a first attempt (the refusal says nothing ran), so this bounds a loop in a
# space whose instances keep splitting the describe and the call, never a duplicate.
BIND_REISSUES = 16


def as_seat(value: Seat | str, what: str = "seat") -> Seat:
    if isinstance(value, Seat):
        return value
    try:
        return Seat.parse(value)
    except ContractError as exc:
        raise usage_error(f"{what}: {exc.message}") from exc


class Session:
    """One caller seat talking to one endpoint over an open NATS connection."""

    def __init__(
        self,
        nc: NATS,
        space: str,
        endpoint: str,
        seat: Seat | str,
        *,
        name: str = "cotal-tasks-client",
        timeout: float = 10.0,
        retries: int = 1,
        generation: str | None = None,
    ) -> None:
        try:
            self._token = endpoint_token(endpoint)
        except ContractError as exc:
            raise usage_error(exc.message) from exc
        self.nc = nc
        self.space = space
        self.endpoint = endpoint
        self.seat = as_seat(seat)
        self.name = name
        self.timeout = timeout
        self.retries = retries
        try:
            self.rail = CallerRail(space, self.seat, generation)
        except ValueError as exc:
            raise usage_error(f"generation {generation!r}: {exc}. Give 32 hex digits") from exc
        self._store = ContractStore(nc, space)
        self._service: Service | None = None

    @property
    def resolved(self) -> Service | None:
        """The service of the last describe, if any."""
        return self._service

    def _envelope(self, command: str, request_id: str, wait_s: float) -> dict[str, Any]:
        return {
            "v": 1,
            "id": request_id,
            "op": {"endpoint": self.endpoint, "command": command},
            "class": "ephemeral",
            "replyExpected": True,
            "deadlineMs": max(1, int(wait_s * 1000)),
            "from": {"id": self.seat.principal, "name": self.name},
        }

    async def describe(self, timeout: float | None = None) -> Service:  # noqa: ASYNC109
        """Describe the endpoint, fetch and verify its contract, and bind to the instance
        that answered. Later calls pin this contract and this instance."""
        wait_s = timeout or self.timeout
        body = self._envelope("describe", new_id(), wait_s)
        subject = self.rail.request(self._token, "describe", nonce())
        answer = await exchange(
            self.nc,
            self.rail,
            subject,
            body,
            f"describe of {self.endpoint}",
            wait_s,
            token=self._token,
            repeat_s=DESCRIBE_RETRY_S,
        )
        if not answer.ok:
            raise from_reply(answer.reply)
        self._service = await resolve(
            self._store, self.endpoint, answer.reply.get("data"), answer.responder
        )
        return self._service

    async def service(self) -> Service:
        """The resolved service, describing first when nothing is resolved yet."""
        return self._service or await self.describe()

    def _route(
        self, row: CommandContract, mode: Mode | None, target: Seat | None
    ) -> tuple[Mode | None, Seat | None]:
        """The mode and target to send, or a usage error naming the right shape."""
        if not row.targeted:
            refusal = mode_refusal(row.name, (), mode, target_given=target is not None)
            if refusal is not None:
                raise usage_error(refusal.message)
            return None, None
        if mode is None and target is not None:
            mode = "owner" if target.owner == self.seat.owner and "owner" in row.modes else "any"
        if mode is None:
            raise usage_error(
                f"{row.name} is a targeted command ({row.targeting()}) and none was given. "
                "Give a mode (mode self acts on your own seat)"
            )
        refusal = mode_refusal(row.name, row.modes, mode, target_given=target is not None)
        if refusal is not None:
            raise usage_error(refusal.message)
        return mode, target

    async def invoke_answer(
        self,
        command: str,
        args: Mapping[str, Any] | None = None,
        *,
        target: Seat | str | None = None,
        mode: Mode | None = None,
        envelope_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (the wire deadline, deadlineMs)
        check_args: bool = True,
    ) -> Answer:
        """Invoke ``command`` and return the attributed reply, ``ok`` or not.

        Raises ``TasksError`` for what the client refuses itself (before sending: a
        usage error, ``bad-request``/``not-executed``), for a missing grant, for silence
        past the retries, and for a reply it cannot accept. ``check_args=False`` sends
        args the input schema refuses, for probes and conformance checks that want the
        endpoint's own refusal.
        """
        wait_s = timeout or self.timeout
        service = await self.service()
        row = self._row(service, command)
        target_seat = None if target is None else as_seat(target, "target")
        mode, target_seat = self._route(row, mode, target_seat)
        payload = {} if args is None else dict(args)
        if check_args and not row.args.is_valid(payload):
            raise usage_error(args_refused(command, payload, row.args))
        if envelope_id is not None and not ID_TOKEN.fullmatch(envelope_id):
            raise usage_error(
                "an envelope id is 1 to 64 characters of [A-Za-z0-9_-]. Choose one of those"
            )
        body = self._envelope(command, envelope_id or new_id(), wait_s)
        body["args"] = payload
        if target_seat is not None:
            body["target"] = {
                "owner": target_seat.owner,
                "actor": target_seat.actor,
                "lifecycleUid": target_seat.lifecycleUid,
            }
        retries, reissues = self.retries, 0
        while True:
            body["op"].update(inputDigest=row.input_digest, outputDigest=row.output_digest)
            body["bind"] = service.bind()
            subject = self.rail.request(
                self._token,
                command,
                nonce(),
                mode=mode,
                target_owner=None if target_seat is None else target_seat.owner,
            )
            try:
                answer = await exchange(
                    self.nc, self.rail, subject, body, command, wait_s, token=self._token
                )
            except TasksError as exc:
                if exc.code is ErrorCode.DEADLINE_EXCEEDED and retries > 0:
                    retries -= 1  # the same envelope id: the endpoint applies it once
                    continue
                raise
            if _bind_refused(answer):
                _check_bind_refusal(answer, body["bind"], command)
                error = answer.reply["error"]
                if error.get("outcome") == "not-executed" and reissues < BIND_REISSUES:
                    reissues += 1
                    service = await self.describe(wait_s)
                    row = self._row(service, command)
                    continue
                return answer
            _check_currency(answer, service, command)
            if answer.ok and not row.output.is_valid(answer.reply.get("data")):
                raise TasksError(
                    ErrorCode.CONTRACT_MISMATCH,
                    f"the {command} reply does not fit the output schema the endpoint "
                    "published; the command ran, but its result cannot be trusted. Report it "
                    "to the endpoint's operator",
                    outcome="executed",
                    reply=answer.reply,
                )
            return answer

    async def carries(self, command: str, *, mode: Mode | None = None) -> bool:
        """Whether the broker carries this seat's ``command`` (at ``mode``), asked without
        a call: a cast of empty args. The endpoint answers a cast to nobody and logs no
        refusal of it, and the contract refuses empty args of every write before anything
        runs (a read runs, and its answer goes nowhere), so asking changes nothing."""
        service = await self.service()
        row = self._row(service, command)
        mode, _ = self._route(row, mode, None)
        body = self._envelope(command, new_id(), self.timeout)
        body.update(replyExpected=False, args={}, bind=service.bind())
        body["op"].update(inputDigest=row.input_digest, outputDigest=row.output_digest)
        subject = self.rail.request(self._token, command, nonce(), mode=mode)
        return await carried(self.nc, subject, body, self.timeout)

    async def invoke(
        self,
        command: str,
        args: Mapping[str, Any] | None = None,
        *,
        target: Seat | str | None = None,
        mode: Mode | None = None,
        envelope_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (the wire deadline, deadlineMs)
    ) -> Any:
        """Invoke ``command`` and return its result (the reply's ``data``); a refusal is
        raised as ``TasksError``. The options are ``invoke_answer``'s, named (a misspelt
        one is a ``TypeError``, never dropped: a lost ``envelope_id`` would apply twice)."""
        answer = await self.invoke_answer(
            command, args, target=target, mode=mode, envelope_id=envelope_id, timeout=timeout
        )
        if not answer.ok:
            raise from_reply(answer.reply)
        return answer.reply.get("data")

    def _row(self, service: Service, command: str) -> CommandContract:
        row = service.commands.get(command)
        if row is None:
            raise usage_error(
                f"{self.endpoint} shows this caller no command {command!r}. Name one it serves: "
                + (", ".join(service.commands) or "nothing to this caller")
            )
        return row


def _bind_refused(answer: Answer) -> bool:
    error = answer.reply.get("error")
    if answer.ok or not isinstance(error, dict):
        return False
    details = error.get("details")
    return isinstance(details, list) and any(
        isinstance(d, dict) and d.get("kind") == BIND_REFUSED for d in details
    )


def _check_bind_refusal(answer: Answer, bind: dict[str, Any], command: str) -> None:
    """A bind refusal is believed only when it is derivable: computed from this request's
    bind, by the instance the reply subject names, which is not the bound one."""
    detail = next(d for d in answer.reply["error"]["details"] if d.get("kind") == BIND_REFUSED)
    r = answer.responder
    served = {"instanceId": r.instance_id, "epoch": r.epoch}
    if served == bind:
        why = "the bound incarnation itself claims to be another one"
    elif detail.get("boundTo") != bind:
        why = "the refusal names a bind this request did not carry"
    elif detail.get("servedBy") != served:
        why = "the refusal's servedBy contradicts the reply subject"
    else:
        return
    raise TasksError(
        ErrorCode.INTERNAL,
        f"{command} came back refused by the bind fence, but {why}; the refusal is not "
        "trusted and whether the command ran is unknown. Report it to the endpoint's operator",
        outcome="unknown",
        reply=answer.reply,
    )


def _check_currency(answer: Answer, service: Service, command: str) -> None:
    """The answer must come from the incarnation the describe bound."""
    r = answer.responder
    if r.instance_id != service.instance_id:
        raise TasksError(
            ErrorCode.FAILED_PRECONDITION,
            f"instance {r.instance_id} answered {command}, but this client is bound to "
            f"{service.instance_id}; it answered without honouring the bind, so whether the "
            "command ran is unknown. Read the task back before re-issuing a write",
            outcome="unknown",
            reply=answer.reply,
        )
    if r.epoch != service.epoch:
        raise TasksError(
            ErrorCode.EXPIRED,
            f"{command} was answered by epoch {r.epoch} of the bound instance, not the bound "
            f"epoch {service.epoch}; whether it ran is unknown. Describe again, read the "
            "task back, then re-issue",
            outcome="unknown",
            reply=answer.reply,
        )
