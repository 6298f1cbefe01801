"""The status-binding invariant and each write command's transition, as pure functions.

Each transition takes the current record (or none), the validated input, the caller or
target seat and the clock reading, and returns the next record or raises
``ContractError``. A transition that changes nothing returns the very record it was
given (``result is task``), which is how the service tells a no-op from a write.

The invariant (section 2): ``claimed`` and ``blocked`` need a binding, ``open`` forbids
one, ``done`` and ``dropped`` admit either.
"""

from __future__ import annotations

from typing import Any

from cotal_tasks.core.errors import ContractError, ErrorCode
from cotal_tasks.core.identity import Seat
from cotal_tasks.core.messages import (
    AdministerTaskInput,
    BindTaskInput,
    CreateTaskInput,
    EvidenceInput,
    UpdateTaskInput,
)
from cotal_tasks.core.models import (
    MAX_EVIDENCE,
    NEEDS_BINDING,
    TASK_VERSION,
    TERMINAL,
    Task,
    TaskBinding,
    TaskEvidence,
    TaskStatus,
)
from cotal_tasks.core.text import TextRefused, check_task_text

ENVIRONMENT_MAX_BYTES = 2048


def invariant_violation(status: TaskStatus, bound: bool) -> str | None:
    """Why ``status`` with or without a binding breaks the invariant, or ``None``."""
    if status in NEEDS_BINDING and not bound:
        return f"status {status!r} needs a bound seat"
    if status == "open" and bound:
        return "status 'open' means nobody is working on the task, yet a seat is bound"
    return None


def check_invariant(task: Task) -> None:
    """Raise ``bad-request`` when ``task`` breaks the status-binding invariant."""
    why = invariant_violation(task.status, task.binding is not None)
    if why is not None:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"task {task.taskId!r}: {why}, so the record would be invalid. Send a status "
            "that fits the binding",
        )


def new_binding(seat: Seat, *, bound_by: str, environment: str | None, now: int) -> TaskBinding:
    """A binding to ``seat``, with the environment under section 2's three outcomes.

    ``environment`` is the raw value the seat's presence card carried (``None``: none).
    An admitted value is kept byte for byte; a refused one is withheld, never rewritten,
    and never blocks the binding.
    """
    fields: dict[str, Any] = {
        "owner": seat.owner,
        "actor": seat.actor,
        "lifecycleUid": seat.lifecycleUid,
        "boundAt": now,
        "boundBy": bound_by,
    }
    if environment is not None:
        try:
            fields["environment"] = check_task_text(
                environment, ENVIRONMENT_MAX_BYTES, field="environment"
            )
        except TextRefused:
            fields["environmentWithheld"] = True
    return TaskBinding.model_validate(fields)


def _next(task: Task, now: int, **changes: Any) -> Task:
    """Validate the next state of ``task`` (never ``model_copy``), bumping ``updatedAt``."""
    data = task.model_dump()
    data.update(changes)
    data["updatedAt"] = max(now, task.updatedAt)
    nxt = Task.model_validate(data)
    check_invariant(nxt)
    return nxt


def _append_evidence(
    task: Task, supplied: tuple[EvidenceInput, ...], now: int
) -> tuple[TaskEvidence, ...]:
    have = list(task.evidence)
    seen = {(item.kind, item.ref) for item in have}
    for item in supplied:
        if (item.kind, item.ref) in seen:
            continue
        seen.add((item.kind, item.ref))
        have.append(TaskEvidence(kind=item.kind, ref=item.ref, addedAt=now))
    if len(have) > MAX_EVIDENCE:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"task {task.taskId!r} would carry {len(have)} evidence entries, over the limit of "
            f"{MAX_EVIDENCE}. Attach fewer (evidence is never removed from a task)",
        )
    return tuple(have)


def create_task(args: CreateTaskInput, *, task_id: str, space: str, now: int) -> Task:
    """``create-task``: a new unbound task, ``open`` unless ``done`` or ``dropped`` is asked."""
    status = args.status or "open"
    evidence = tuple(
        TaskEvidence(kind=item.kind, ref=item.ref, addedAt=now)
        for item in dict.fromkeys(args.evidence or ())
    )
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": task_id,
        "space": space,
        "title": args.title,
        "brief": args.brief,
        "status": status,
        "evidence": evidence,
        "createdAt": now,
        "updatedAt": now,
    }
    task = Task.model_validate(data)
    check_invariant(task)
    return task


def _refuse_terminal(task: Task, command: str) -> None:
    if task.status in TERMINAL:
        raise ContractError(
            ErrorCode.FAILED_PRECONDITION,
            f"task {task.taskId!r} is {task.status}; {command} binds work in progress only. "
            'An operator can reopen it first with administer-task {"status": "open"}',
        )


def claim_task(task: Task, caller: Seat, *, environment: str | None, now: int) -> Task:
    """``claim-task``: ``open`` to ``claimed`` with the caller's binding; idempotent."""
    if task.binding is not None:
        if task.binding.names(caller.owner, caller.actor, caller.lifecycleUid):
            return task
        raise ContractError(
            ErrorCode.CONFLICT,
            f"task {task.taskId!r} is bound to another seat "
            f"({task.binding.owner}.{task.binding.actor}). Pick an unbound task, or ask an "
            "operator to free it with administer-task or move it with bind-task",
        )
    _refuse_terminal(task, "claim-task")
    binding = new_binding(caller, bound_by=caller.principal, environment=environment, now=now)
    return _next(task, now, status="claimed", binding=binding.model_dump())


def bind_task(
    task: Task,
    target: Seat,
    args: BindTaskInput,
    *,
    bound_by: str,
    environment: str | None,
    now: int,
) -> Task:
    """``bind-task``: bind to the target seat after the optional ``expectedBinding`` check."""
    current = task.binding
    if current is not None and current.names(target.owner, target.actor, target.lifecycleUid):
        return task  # the bind already holds: a re-issue returns the same record
    if args.checks_binding:
        expected = args.expectedBinding
        if expected is None and current is not None:
            raise ContractError(
                ErrorCode.CONFLICT,
                f"task {task.taskId!r} is bound, but expectedBinding null asserted it unbound. "
                "Read it with get-task and retry with its current binding",
            )
        if expected is not None and (
            current is None
            or not current.names(expected.owner, expected.actor, expected.lifecycleUid)
        ):
            raise ContractError(
                ErrorCode.CONFLICT,
                f"task {task.taskId!r} is not bound to the expectedBinding triple. "
                "Read it with get-task and retry with its current binding",
            )
    _refuse_terminal(task, "bind-task")
    binding = new_binding(target, bound_by=bound_by, environment=environment, now=now)
    status = "claimed" if task.status == "open" else task.status
    return _next(task, now, status=status, binding=binding.model_dump())


def update_task(task: Task, caller: Seat, args: UpdateTaskInput, *, now: int) -> Task:
    """``update-task``: only the bound seat, lifecycle uid included, may progress its task."""
    binding = task.binding
    if binding is None or not binding.names(caller.owner, caller.actor, caller.lifecycleUid):
        raise ContractError(
            ErrorCode.PERMISSION_DENIED,
            f"task {task.taskId!r} is not bound to the calling seat {caller}; update-task is "
            "for the seat the task is bound to (a new incarnation is a different seat). "
            "Claim an unbound task, or ask an operator to bind this one to you",
        )
    changes: dict[str, Any] = {}
    if args.status is not None and args.status != task.status:
        changes["status"] = args.status
    if args.brief is not None and args.brief != task.brief:
        changes["brief"] = args.brief
    if args.evidence:
        evidence = _append_evidence(task, args.evidence, now)
        if evidence != task.evidence:
            changes["evidence"] = [item.model_dump() for item in evidence]
    if not changes and args.note is None:
        return task
    # A note alone still writes: it lands in the history and moves updatedAt.
    return _next(task, now, **changes)


def administer_task(task: Task, args: AdministerTaskInput, *, now: int) -> Task:
    """``administer-task``: set a status and/or clear the binding; never create one."""
    if args.status is None and args.unbind is None:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            "administer-task needs status, unbind or both, and a note alone changes nothing. "
            "Send the note with a status or unbind",
        )
    binding = task.binding
    status = task.status
    if args.unbind:
        binding = None
        if args.status is None and task.status not in TERMINAL:
            status = "open"
    if args.status is not None:
        status = args.status
    why = invariant_violation(status, binding is not None)
    if why is not None:
        remedy = (
            "Add unbind: true to clear the binding in the same write"
            if binding is not None
            else "Bind it first with bind-task, or the seat claims it with claim-task"
        )
        raise ContractError(ErrorCode.BAD_REQUEST, f"task {task.taskId!r}: {why}. {remedy}")
    if status == task.status and binding == task.binding and args.note is None:
        return task
    return _next(
        task, now, status=status, binding=None if binding is None else binding.model_dump()
    )
