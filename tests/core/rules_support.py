"""The table notation the rule tests share: the seats, a record in a given cell, and the
outcome of a command in the tables' notation (see ``test_rules.py``), plus the inputs
each command's table is written in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cotal_tasks.core import (
    STATUSES,
    TASK_VERSION,
    AdministerTaskInput,
    BindingRef,
    BindTaskInput,
    ContractError,
    Seat,
    Task,
    TaskStatus,
    UpdateTaskInput,
    check_invariant,
)

SEATS: dict[str, Seat] = {
    "A": Seat("acme", "builder", "a" * 26),
    "A2": Seat("acme", "builder", "a2" + "0" * 24),
    "B": Seat("acme", "reviewer", "b" * 26),
    "T": Seat("ops", "runner", "t" * 32),
    "Z": Seat("zeta", "nobody", "z" * 26),
}
TASK_ID = "b-7k2m9q"
CREATED = 100
UPDATED = 200
NOW = 1_000
BOUND_AT = 150
OPERATOR = "ops.admin"

Apply = Callable[[Task], Task]


def make(status: TaskStatus, bound_to: str | None, **extra: Any) -> Task:
    """A record in the given cell, built directly (the model does not check the invariant)."""
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": TASK_ID,
        "space": "space-1",
        "title": "Rotate the staging certificates",
        "status": status,
        "evidence": [],
        "createdAt": CREATED,
        "updatedAt": UPDATED,
    }
    if bound_to is not None:
        seat = SEATS[bound_to]
        data["binding"] = {
            "owner": seat.owner,
            "actor": seat.actor,
            "lifecycleUid": seat.lifecycleUid,
            "boundAt": BOUND_AT,
            "boundBy": seat.principal,
        }
    data.update(extra)
    return Task.model_validate(data)


def cell(name: str) -> Task:
    """``"claimed/A"`` → a claimed task bound to A; ``"open/-"`` → an unbound open task."""
    status, _, seat = name.partition("/")
    assert status in STATUSES
    return make(status, None if seat == "-" else seat)


def bound_seat(task: Task) -> str:
    if task.binding is None:
        return "-"
    for name, seat in SEATS.items():
        if task.binding.names(seat.owner, seat.actor, seat.lifecycleUid):
            return name
    raise AssertionError(f"bound to an unknown seat: {task.binding}")


def outcome_of(task: Task, apply: Apply) -> str:
    """Run ``apply(task)`` and describe its outcome in the table's notation."""
    before = task.model_dump()
    try:
        result = apply(task)
    except ContractError as error:
        assert task.model_dump() == before
        return error.code.value
    assert isinstance(result, Task)
    if result is task:
        return "same"
    check_invariant(result)
    assert result.taskId == task.taskId
    assert result.createdAt == task.createdAt
    assert result.updatedAt == max(NOW, task.updatedAt)
    return f"{result.status}/{bound_seat(result)}"


def table_cases(
    table: Mapping[str, Sequence[str]], columns: Sequence[str]
) -> list[tuple[str, str, str]]:
    """Every ``(start cell, column, expected outcome)`` of a command's table, row by row."""
    return [
        (start, column, row[index])
        for start, row in table.items()
        for index, column in enumerate(columns)
    ]


VALID_CELLS = ["open/-", "claimed/A", "blocked/A", "done/-", "done/A", "dropped/-", "dropped/A"]
INVALID_CELLS = ["open/A", "claimed/-", "blocked/-"]


EXPECTED_VARIANTS = ["absent", "null", "match", "mismatch"]


def bind_input(task: Task, variant: str) -> BindTaskInput:
    raw: dict[str, Any] = {"taskId": task.taskId}
    if variant == "null":
        raw["expectedBinding"] = None
    elif variant == "match":
        # The ref of the current binding; on an unbound task, a ref naming the target.
        seat = SEATS[bound_seat(task)] if task.binding is not None else SEATS["T"]
        raw["expectedBinding"] = {
            "owner": seat.owner,
            "actor": seat.actor,
            "lifecycleUid": seat.lifecycleUid,
        }
    elif variant == "mismatch":
        raw["expectedBinding"] = BindingRef(
            owner="zeta", actor="nobody", lifecycleUid="z" * 26
        ).model_dump()
    return BindTaskInput.model_validate(raw)


UPDATE_ARGS = ["claimed", "blocked", "done", "dropped", "brief-only"]


def update_input(arg: str) -> UpdateTaskInput:
    if arg == "brief-only":
        return UpdateTaskInput.model_validate({"taskId": TASK_ID, "brief": "New brief."})
    return UpdateTaskInput.model_validate({"taskId": TASK_ID, "status": arg})


ADMIN_ACTIONS = [
    *(f"status:{s}" for s in STATUSES),
    "unbind",
    *(f"unbind+status:{s}" for s in STATUSES),
]


def admin_input(action: str, **extra: Any) -> AdministerTaskInput:
    raw: dict[str, Any] = {"taskId": TASK_ID, **extra}
    if action.startswith("unbind"):
        raw["unbind"] = True
    if "status:" in action:
        raw["status"] = action.split("status:", 1)[1]
    return AdministerTaskInput.model_validate(raw)
