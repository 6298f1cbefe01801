"""Admission: every check between a parsed request and its effect, in the order
``serveEndpoint`` uses after the envelope parsed.

``check_agreement`` is the subject half of the boundary (``op-mismatch``,
``target-mismatch``, ``sender-mismatch``); ``Admission.admitted`` adds the class, the
pinned digests, the bind fence, mode admission, the args (parsed once, by ``parse_args``)
and the target's currency, and yields the ``Call`` to serve, its input already parsed.
Every refusal says ``not-executed``.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from cotal_tasks.bridge.service.commands import Call, PresenceSource, unknown_command
from cotal_tasks.bridge.service.validation import parse_args, preview
from cotal_tasks.bridge.wire import envelope
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.space import LifecycleHeads
from cotal_tasks.bridge.wire.subjects import RequestSubject
from cotal_tasks.core import (
    COMMANDS,
    CommandSpec,
    ContractError,
    ErrorCode,
    Input,
    Seat,
    contract_artifacts,
)
from cotal_tasks.core.commands import MODES, mode_refusal
from cotal_tasks.core.errors import BIND_REFUSED

log = logging.getLogger(__name__)

TargetCheck = Literal["lifecycle", "presence", "none"]
DESCRIBE = "describe"
_PASSED_KEPT = 4096


@dataclass(frozen=True, slots=True)
class _Contract:
    input_digest: str
    output_digest: str


def contracts() -> dict[str, _Contract]:
    artifacts = contract_artifacts()
    return {
        name: _Contract(artifacts.inputs[name].digest, artifacts.outputs[name].digest)
        for name in COMMANDS
    }


@dataclass
class Admission:
    """The checks of one endpoint instance: its contracts, its incarnation (the bind
    fence) and how a target's currency is read."""

    endpoint: str
    identity: InstanceIdentity
    presence: PresenceSource
    lifecycle: LifecycleHeads | None
    target_check: TargetCheck
    contracts: dict[str, _Contract]
    # Per request subject up to its nonce and envelope repeating part (``Request.shape``,
    # held here so its id is not reused): the command's row and the call's target, once
    # a request without a body target passed with them. What is then left to check is
    # what is the request's own: its deadline (on the scatter rail) and its args; a body
    # target takes the whole path.
    _passed: dict[tuple[str, int], tuple[envelope.Request, CommandSpec, Seat | None]] = field(
        default_factory=dict
    )

    def admitted(
        self, subject: RequestSubject, request: envelope.Request
    ) -> Call | Coroutine[Any, Any, Call]:
        """The call to serve once every check before the effect passed, or what finds it
        when the target's currency has to be looked up; a refusal says ``not-executed``.

        The answer to describe is the endpoint's own; its call is never served. The answer
        is built from validated models or the board's stored (validated) wire form, so it
        is not checked against the output schema again here; the tests hold every
        command's reply to the published output schema.
        """
        shape = request.shape
        try:
            if shape is not None and request.target is None:
                # Its subject and repeating part passed before: only its own parts are left.
                passed = self._passed.get((subject.head, id(shape)))
                if (
                    passed is not None
                    and passed[0] is shape
                    and (request.deadline_ms is not None or subject.route != "all")
                ):
                    args = parse_args(passed[1], request.args)
                    return self._call(subject, request, passed[2], args)
            parsed = self._admit(subject, request)
            mode = subject.mode
            # an untargeted request has no body target (check_agreement saw to it)
            if mode is not None and mode != "self":
                return self._targeted(subject, request, parsed)
        except ContractError as exc:
            raise exc.with_outcome("not-executed") from None
        except Exception as exc:
            raise _checking_failed(request, exc) from exc
        target = None if mode is None else subject.caller
        if shape is not None and request.target is None and request.command != DESCRIBE:
            self._remember(subject, shape, target)
        return self._call(subject, request, target, parsed)

    def _remember(
        self, subject: RequestSubject, shape: envelope.Request, target: Seat | None
    ) -> None:
        """Remember that ``subject`` (up to its nonce) with the repeating part ``shape``
        of its envelope passed every check that depends on nothing else (see ``_passed``)."""
        if len(self._passed) >= _PASSED_KEPT:
            self._passed.clear()
        spec = COMMANDS[shape.command]
        self._passed[subject.head, id(shape)] = (shape, spec, target)

    async def _targeted(
        self, subject: RequestSubject, request: envelope.Request, parsed: Input | None
    ) -> Call:
        try:
            target = await self._current_target(subject, request)
        except ContractError as exc:
            raise exc.with_outcome("not-executed") from None
        except Exception as exc:
            raise _checking_failed(request, exc) from exc
        return self._call(subject, request, target, parsed)

    @staticmethod
    def _call(
        subject: RequestSubject,
        request: envelope.Request,
        target: Seat | None,
        parsed: Input | None,
    ) -> Call:
        mode = None if subject.mode is None else MODES[subject.mode]  # admitted above
        # positional: one is made for every request, and keywords cost more
        return Call(request.command, subject.caller, request.id, request.args, mode, target, parsed)

    def _admit(self, subject: RequestSubject, request: envelope.Request) -> Input | None:
        """Every check before the effect but the target's currency; the parsed args (none
        for describe), which the service then takes as they are."""
        check_agreement(request, subject)
        if request.cls != "ephemeral":
            raise ContractError(
                ErrorCode.CLASS_MISMATCH,
                f"class {request.cls!r} does not equal the command's contract class "
                "'ephemeral'. Send class ephemeral",
            )
        if request.command == DESCRIBE:
            self._check_describe(subject, request)
            return None
        contract = self.contracts.get(request.command)
        if contract is None:
            raise unknown_command(request.command)
        if (request.input_digest, request.output_digest) != (
            contract.input_digest,
            contract.output_digest,
        ):
            raise ContractError(
                ErrorCode.CONTRACT_MISMATCH,
                f"the pinned digests do not match the served {request.command} contract. "
                "Describe the endpoint again and pin the digests it names",
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
            raise ContractError(refusal.code, refusal.message)
        return parse_args(spec, request.args)

    def _check_describe(self, subject: RequestSubject, request: envelope.Request) -> None:
        if subject.mode is not None:
            raise ContractError(
                ErrorCode.PERMISSION_DENIED, "describe is untargeted. Send no target"
            )
        if request.args is not None:
            raise ContractError(ErrorCode.BAD_REQUEST, "describe takes no args. Send none")

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
            + ". Describe the endpoint again and re-issue",
            outcome="not-executed",
            details=(detail,),
        )

    async def _current_target(self, subject: RequestSubject, request: envelope.Request) -> Seat:
        """The body target of an owner- or any-mode request, if it is current (a targeted
        form without a body target was refused by ``check_agreement``)."""
        t = request.target
        assert t is not None, "check_agreement admits no targeted form without a target"
        seat = Seat(t.owner, t.actor, t.lifecycleUid)
        if self.target_check == "lifecycle":
            if self.lifecycle is None:
                raise ContractError(
                    ErrorCode.UNAVAILABLE,
                    "no trusted lifecycle reader is configured, so targeted commands are "
                    "refused. Serve on a space with lifecycle records, or set target_check",
                )
            mapping = await self.lifecycle.current(t.owner, t.actor)
            if mapping is None or mapping.state != "active":
                raise ContractError(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} has no active lifecycle mapping. Check the seat "
                    "is running, then retry with its current lifecycle uid",
                )
            if mapping.lifecycle_uid != t.lifecycleUid:
                raise ContractError(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} is now lifecycle {mapping.lifecycle_uid}, not "
                    f"{t.lifecycleUid}. Retry with the current uid",
                )
            if t.mappingRevision is not None and t.mappingRevision != mapping.mapping_revision:
                raise ContractError(
                    ErrorCode.EXPIRED,
                    f"target {seat.principal} mapping is at revision {mapping.mapping_revision}, "
                    f"not the pinned {t.mappingRevision}. Re-read it and retry",
                )
        elif self.target_check == "presence":
            card = await self.presence.lookup(t.owner, t.actor)
            if card is None or not card.fresh or card.lifecycleUid != t.lifecycleUid:
                raise ContractError(
                    ErrorCode.EXPIRED,
                    f"target {seat} has no fresh presence card with that lifecycle uid "
                    "(target_check = presence). Start the seat or check the triple",
                )
        return seat


def check_agreement(request: envelope.Request, subject: RequestSubject) -> None:
    """The body must agree with the broker-authenticated subject."""
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


def _checking_failed(request: envelope.Request, exc: Exception) -> ContractError:
    log.error("internal error admitting %s", request.command, exc_info=exc)
    return ContractError(
        ErrorCode.INTERNAL,
        f"the bridge failed checking the request ({type(exc).__name__}) before serving it. "
        "Retry, and report it if it persists",
        outcome="not-executed",
    )
