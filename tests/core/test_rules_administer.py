"""administer-task, cell by cell, and every command on a record that breaks the invariant
(notation: ``test_rules.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    AdministerTaskInput,
    ContractError,
    ErrorCode,
    Task,
    TaskStatus,
    administer_task,
    bind_task,
    check_invariant,
    claim_task,
    update_task,
)
from tests.core.rules_support import (
    ADMIN_ACTIONS,
    EXPECTED_VARIANTS,
    INVALID_CELLS,
    NOW,
    OPERATOR,
    SEATS,
    TASK_ID,
    UPDATE_ARGS,
    VALID_CELLS,
    Apply,
    admin_input,
    bind_input,
    cell,
    make,
    outcome_of,
    table_cases,
    update_input,
)

# --- administer-task ------------------------------------------------------------------

# Columns: status open, claimed, blocked, done, dropped | unbind |
#          unbind with status open, claimed, blocked, done, dropped.
BAD = "bad-request"
ADMIN_TABLE: dict[str, tuple[str, ...]] = {
    "open/-": (
        "same", BAD, BAD, "done/-", "dropped/-",
        "same",
        "same", BAD, BAD, "done/-", "dropped/-",
    ),
    "claimed/A": (
        BAD, "same", "blocked/A", "done/A", "dropped/A",
        "open/-",
        "open/-", BAD, BAD, "done/-", "dropped/-",
    ),
    "blocked/A": (
        BAD, "claimed/A", "same", "done/A", "dropped/A",
        "open/-",
        "open/-", BAD, BAD, "done/-", "dropped/-",
    ),
    "done/-": (
        "open/-", BAD, BAD, "same", "dropped/-",
        "same",
        "open/-", BAD, BAD, "same", "dropped/-",
    ),
    "done/A": (
        BAD, "claimed/A", "blocked/A", "same", "dropped/A",
        "done/-",
        "open/-", BAD, BAD, "done/-", "dropped/-",
    ),
    "dropped/-": (
        "open/-", BAD, BAD, "done/-", "same",
        "same",
        "open/-", BAD, BAD, "done/-", "same",
    ),
    "dropped/A": (
        BAD, "claimed/A", "blocked/A", "done/A", "same",
        "dropped/-",
        "open/-", BAD, BAD, "done/-", "dropped/-",
    ),
}  # fmt: skip


ADMIN_CASES = table_cases(ADMIN_TABLE, ADMIN_ACTIONS)


@pytest.mark.parametrize(("start", "action", "expected"), ADMIN_CASES)
def test_administer_task(start: str, action: str, expected: str) -> None:
    args = admin_input(action)
    result = outcome_of(cell(start), lambda t: administer_task(t, args, now=NOW))
    assert result == expected


@pytest.mark.parametrize(
    ("start", "action"),
    [(start, action) for start, action, expected in ADMIN_CASES if expected == "same"],
)
def test_administer_no_op_with_a_note_is_a_write(start: str, action: str) -> None:
    task = cell(start)
    result = administer_task(task, admin_input(action, note="Checked."), now=NOW)
    assert result is not task
    assert result.updatedAt == NOW
    assert result.model_dump(exclude={"updatedAt"}) == task.model_dump(exclude={"updatedAt"})


@pytest.mark.parametrize(
    ("start", "action", "expected"),
    [case for case in ADMIN_CASES if case[2] != "same"],
)
def test_administer_note_does_not_change_the_outcome(
    start: str, action: str, expected: str
) -> None:
    args = admin_input(action, note="Seat is gone.")
    result = outcome_of(cell(start), lambda t: administer_task(t, args, now=NOW))
    assert result == expected


@pytest.mark.parametrize("start", VALID_CELLS)
@pytest.mark.parametrize("action", ADMIN_ACTIONS)
def test_administer_never_creates_or_changes_a_binding(start: str, action: str) -> None:
    task = cell(start)
    if ADMIN_TABLE[start][ADMIN_ACTIONS.index(action)] == BAD:
        with pytest.raises(ContractError):
            administer_task(task, admin_input(action), now=NOW)
        return
    result = administer_task(task, admin_input(action), now=NOW)
    assert result.binding is None or result.binding == task.binding


@pytest.mark.parametrize("status", ["claimed", "blocked"])
def test_administer_unbind_frees_work_in_progress_in_one_step(status: TaskStatus) -> None:
    result = administer_task(make(status, "A"), admin_input("unbind"), now=NOW)
    assert result.status == "open"
    assert result.binding is None
    assert "binding" not in result.to_json()
    check_invariant(result)


def test_administer_unbind_on_done_keeps_done_and_clears_the_binding() -> None:
    result = administer_task(make("done", "A"), admin_input("unbind"), now=NOW)
    assert result.status == "done"
    assert result.binding is None


def test_administer_refusal_names_the_remedy() -> None:
    with pytest.raises(ContractError) as caught:
        administer_task(make("claimed", "A"), admin_input("status:open"), now=NOW)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "Add unbind: true" in caught.value.message
    with pytest.raises(ContractError) as caught:
        administer_task(make("open", None), admin_input("status:claimed"), now=NOW)
    assert "Bind it first with bind-task" in caught.value.message


@pytest.mark.parametrize("raw", [{"note": "Seat is gone."}, {}])
def test_administer_with_a_note_alone_or_nothing_is_bad_request(raw: dict[str, Any]) -> None:
    args = AdministerTaskInput.model_validate({"taskId": TASK_ID, **raw})
    with pytest.raises(ContractError) as caught:
        administer_task(make("claimed", "A"), args, now=NOW)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "a note alone changes nothing" in caught.value.message


@pytest.mark.parametrize(
    "raw",
    [
        {"unbind": False},
        {"unbind": 1},
        {"unbind": "true"},
        {"unbind": None},
        {"binding": {"owner": "a", "actor": "b", "lifecycleUid": "c"}},
        {"status": "archived"},
    ],
)
def test_administer_input_refuses_malformed_fields(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AdministerTaskInput.model_validate({"taskId": TASK_ID, **raw})


# --- records that break the invariant ------------------------------------------------


def _claim_by(seat: str) -> Apply:
    def run(task: Task) -> Task:
        return claim_task(task, SEATS[seat], environment=None, now=NOW)

    return run


def _bind_with(variant: str) -> Apply:
    def run(task: Task) -> Task:
        args = bind_input(task, variant)
        return bind_task(task, SEATS["T"], args, bound_by=OPERATOR, environment=None, now=NOW)

    return run


def _update_with(arg: str) -> Apply:
    def run(task: Task) -> Task:
        return update_task(task, SEATS["A"], update_input(arg), now=NOW)

    return run


def _administer_with(action: str) -> Apply:
    def run(task: Task) -> Task:
        return administer_task(task, admin_input(action), now=NOW)

    return run


def _every_command() -> list[Apply]:
    return [
        _claim_by("A"),
        _claim_by("B"),
        *map(_bind_with, EXPECTED_VARIANTS),
        *map(_update_with, UPDATE_ARGS),
        *map(_administer_with, ADMIN_ACTIONS),
    ]


@pytest.mark.parametrize("start", INVALID_CELLS)
def test_no_command_writes_an_invalid_record_from_an_invalid_one(start: str) -> None:
    """A record that should never exist: whatever a command writes still satisfies the
    invariant (a refusal or an unchanged no-op is allowed)."""
    task = cell(start)
    with pytest.raises(ContractError):
        check_invariant(task)
    for attempt in _every_command():
        outcome_of(task, attempt)
