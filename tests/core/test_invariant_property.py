"""Random command sequences against one record: every step leaves a record that satisfies
the status-binding invariant and every bound, whatever mix of valid and invalid
commands, seats, statuses, evidence, notes and clock readings produced it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from cotal_tasks.core import (
    MAX_EVIDENCE,
    STATUSES,
    AdministerTaskInput,
    BindTaskInput,
    ClaimTaskInput,
    ContractError,
    CreateTaskInput,
    ErrorCode,
    Seat,
    Task,
    UpdateTaskInput,
    administer_task,
    bind_task,
    check_invariant,
    claim_task,
    contract_artifacts,
    create_task,
    update_task,
)

SEATS = (
    Seat("acme", "builder", "a" * 26),
    Seat("acme", "builder", "a2" + "0" * 24),  # a new incarnation of the first
    Seat("acme", "reviewer", "b" * 26),
    Seat("ops", "runner", "c" * 32),
)
TASK_ID = "t-prop"
KINDS = ("commit", "branch", "run", "review")
BAD_STATUSES = ("archived", "", "OPEN")
VALID_TEXTS = ("Working on it.", "café ☕ 🚀", "passwords: none", "x" * 200)
ENVIRONMENTS = (None, "eu-west/pool-3", "https://u:p@h/", "é" * 1025)

_TASK_OUTPUT = Draft202012Validator(json.loads(contract_artifacts().outputs["get-task"].root.data))
REFUSALS = frozenset(
    {
        ErrorCode.BAD_REQUEST,
        ErrorCode.CONFLICT,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.FAILED_PRECONDITION,
    }
)
INVALID_TEXTS = frozenset(("token: hunter2", "", "a\nb", "x" * 5000))


# Weighted so that a sequence often reaches claimed and blocked work and fills evidence.
COMMAND_MIX = ("update", "claim", "update", "bind", "update", "administer", "claim", "create")


@dataclass(frozen=True)
class Step:
    command: str
    raw: dict[str, Any]
    seat: Seat | None  # None: whichever seat the record is bound to when the step runs
    environment: str | None
    now: int


def _ref(index: int) -> str:
    return f"ref-{index}"


def _rarely(draw: st.DrawFn) -> bool:
    """True about one time in ten: invalid inputs are mixed in without drowning the rest."""
    return draw(st.integers(0, 9)) == 0


def _text(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(sorted(INVALID_TEXTS) if _rarely(draw) else VALID_TEXTS))


def _status(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(BAD_STATUSES if _rarely(draw) else STATUSES))


@st.composite
def evidence(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A run of refs that overlaps earlier runs (so the 32 bound is reached), sometimes
    with a duplicate inside the request and, rarely, a broken entry."""
    start = draw(st.integers(0, 60))
    count = draw(st.integers(1, 20))
    kind = draw(st.sampled_from(KINDS))
    items: list[dict[str, Any]] = [
        {"kind": kind, "ref": _ref(i)} for i in range(start, start + count)
    ]
    duplicate = draw(st.booleans())
    if duplicate:
        items.append(dict(items[0]))
    if _rarely(draw) and _rarely(draw):
        items.append(
            draw(st.sampled_from(({"kind": "note", "ref": "x"}, {"kind": "run", "ref": ""})))
        )
    return items


@st.composite
def steps(draw: st.DrawFn) -> Step:
    command = draw(st.sampled_from(COMMAND_MIX))
    raw: dict[str, Any] = {"taskId": TASK_ID}
    if command == "create":
        raw = {"title": _text(draw)}
        if draw(st.booleans()):
            raw["status"] = _status(draw)
        if draw(st.booleans()):
            raw["evidence"] = draw(evidence())
    elif command == "bind":
        variant = draw(st.sampled_from(("absent", "null", "seat", "current")))
        if variant == "null":
            raw["expectedBinding"] = None
        elif variant == "seat":
            expected = draw(st.sampled_from(SEATS))
            raw["expectedBinding"] = {
                "owner": expected.owner,
                "actor": expected.actor,
                "lifecycleUid": expected.lifecycleUid,
            }
        elif variant == "current":
            raw["expectedBinding"] = "current"  # filled in from the record when applied
    elif command == "update":
        if draw(st.booleans()):
            raw["status"] = _status(draw)
        if draw(st.booleans()):
            raw["evidence"] = draw(evidence())
        if draw(st.booleans()):
            raw["brief"] = _text(draw)
        if draw(st.booleans()):
            raw["note"] = _text(draw)
    elif command == "administer":
        if draw(st.booleans()):
            raw["status"] = _status(draw)
        if draw(st.booleans()):
            raw["unbind"] = draw(st.sampled_from((False, 1))) if _rarely(draw) else True
        if draw(st.booleans()):
            raw["note"] = _text(draw)
    if _rarely(draw) and draw(st.booleans()):
        raw["unexpected"] = 1  # every input is a closed shape
    # Often the bound seat, so that bound work is progressed and not only refused.
    seat = None if draw(st.booleans()) else draw(st.sampled_from(SEATS))
    return Step(
        command=command,
        raw=raw,
        seat=seat,
        environment=draw(st.sampled_from(ENVIRONMENTS)),
        now=draw(st.integers(0, 10_000)),
    )


def _seat(task: Task, step: Step) -> Seat:
    if step.seat is not None:
        return step.seat
    if task.binding is None:
        return SEATS[0]
    return Seat(task.binding.owner, task.binding.actor, task.binding.lifecycleUid)


def _apply(task: Task, step: Step, seat: Seat) -> Task:
    """One command; raises ``ContractError`` or ``ValidationError`` when refused."""
    if step.command == "create":
        created = create_task(
            CreateTaskInput.model_validate(step.raw), task_id="t-other", space="s", now=step.now
        )
        _check_record(created)
        assert created.binding is None
        assert created.status in ("open", "done", "dropped")
        return task  # a create makes another task; this record is untouched
    if step.command == "claim":
        ClaimTaskInput.model_validate(step.raw)
        return claim_task(task, seat, environment=step.environment, now=step.now)
    if step.command == "bind":
        raw = dict(step.raw)
        if raw.get("expectedBinding") == "current":
            raw["expectedBinding"] = None if task.binding is None else task.binding.ref().to_json()
        args = BindTaskInput.model_validate(raw)
        return bind_task(
            task,
            seat,
            args,
            bound_by="ops.admin",
            environment=step.environment,
            now=step.now,
        )
    if step.command == "update":
        return update_task(task, seat, UpdateTaskInput.model_validate(step.raw), now=step.now)
    return administer_task(task, AdministerTaskInput.model_validate(step.raw), now=step.now)


def _attempt(task: Task, step: Step, seat: Seat) -> Task | ContractError | ValidationError:
    try:
        return _apply(task, step, seat)
    except (ContractError, ValidationError) as refusal:
        return refusal


def _has_invalid_input(step: Step) -> bool:
    """True when the input models alone must refuse the step, whatever the record is."""
    raw = step.raw
    if "unexpected" in raw:
        return True
    status = raw.get("status")
    if status in BAD_STATUSES:
        return True
    if step.command == "create" and status in ("claimed", "blocked"):
        return True
    if step.command == "update" and status == "open":
        return True
    if "unbind" in raw and raw["unbind"] is not True:
        return True
    if any(raw.get(name) in INVALID_TEXTS for name in ("title", "brief", "note")):
        return True
    return any(item["kind"] not in KINDS or item["ref"] == "" for item in raw.get("evidence", ()))


def _check_record(task: Task) -> None:
    assert Task.model_validate(task.model_dump()) == task
    check_invariant(task)
    assert len(task.evidence) <= MAX_EVIDENCE
    assert len({(e.kind, e.ref) for e in task.evidence}) == len(task.evidence)
    assert task.createdAt <= task.updatedAt
    if task.binding is not None:
        assert (task.binding.environment is None) or (task.binding.environmentWithheld is None)


def _start(status: str, now: int) -> Task:
    args = CreateTaskInput.model_validate({"title": "Start", "status": status})
    return create_task(args, task_id=TASK_ID, space="space-1", now=now)


@settings(max_examples=200, deadline=None)
@given(
    start=st.sampled_from(("open", "open", "open", "done", "dropped")),
    created=st.integers(0, 5_000),
    sequence=st.lists(steps(), min_size=5, max_size=40),
)
def test_every_sequence_keeps_the_record_valid(
    start: str, created: int, sequence: list[Step]
) -> None:
    task = _start(start, created)
    _check_record(task)
    for step in sequence:
        before = task
        seat = _seat(task, step)
        outcome = _attempt(task, step, seat)
        event(f"{step.command}: {type(outcome).__name__}")
        if isinstance(outcome, ValidationError):
            assert _has_invalid_input(step), step
            continue
        assert not _has_invalid_input(step), step
        if isinstance(outcome, ContractError):
            assert outcome.code in REFUSALS, outcome
            assert outcome.message
            continue
        task = outcome
        event(f"reached {task.status}, {'bound' if task.binding else 'unbound'}")
        if len(task.evidence) == MAX_EVIDENCE:
            event("evidence full")
        _check_record(task)
        # Monotone clock, fixed identity, append-only evidence.
        assert task.updatedAt >= before.updatedAt
        assert (task.taskId, task.createdAt, task.space) == (
            before.taskId,
            before.createdAt,
            before.space,
        )
        assert task.evidence[: len(before.evidence)] == before.evidence
        # Only claim and bind write a binding; update keeps it; administer only clears it.
        if step.command == "update":
            assert task.binding == before.binding
        if step.command == "administer":
            assert task.binding is None or task.binding == before.binding
        if task.binding is not None and task.binding != before.binding:
            assert step.command in ("claim", "bind")
            assert task.binding.names(seat.owner, seat.actor, seat.lifecycleUid)
            assert task.binding.boundAt == step.now
    _TASK_OUTPUT.validate(task.to_json())
