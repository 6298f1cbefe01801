"""The status-binding invariant and every write command's transition, cell by cell.

Outcome notation in the tables: ``"same"`` means the rule returned the very record it
was given (``result is task``); an error code string means ``ContractError`` with that
code; ``"<status>/<seat>"`` means the resulting status and the seat the result is bound to
(``-`` for no binding). Seats: ``A`` the acting seat, ``A2`` a new incarnation of ``A``
(same owner.actor, different lifecycle uid), ``B`` another seat, ``T`` a bind target,
``Z`` a seat no task is ever bound to.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    MAX_EVIDENCE,
    TASK_VERSION,
    BindingRef,
    BindTaskInput,
    ContractError,
    CreateTaskInput,
    ErrorCode,
    TaskBinding,
    TaskStatus,
    bind_task,
    check_invariant,
    claim_task,
    create_task,
)
from tests.core.rules_support import (
    EXPECTED_VARIANTS,
    NOW,
    OPERATOR,
    SEATS,
    TASK_ID,
    bind_input,
    cell,
    make,
    outcome_of,
    table_cases,
)

# --- the invariant itself: 5 statuses x bound/unbound --------------------------------


@pytest.mark.parametrize(
    ("status", "bound", "valid"),
    [
        ("open", False, True),
        ("open", True, False),
        ("claimed", False, False),
        ("claimed", True, True),
        ("blocked", False, False),
        ("blocked", True, True),
        ("done", False, True),
        ("done", True, True),
        ("dropped", False, True),
        ("dropped", True, True),
    ],
)
def test_invariant_cell(status: TaskStatus, bound: bool, valid: bool) -> None:
    task = make(status, "A" if bound else None)
    if valid:
        check_invariant(task)
    else:
        with pytest.raises(ContractError) as caught:
            check_invariant(task)
        assert caught.value.code is ErrorCode.BAD_REQUEST
        assert TASK_ID in caught.value.message
        assert status in caught.value.message


# --- create-task ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [(None, "open"), ("open", "open"), ("done", "done"), ("dropped", "dropped")],
)
def test_create_task_makes_an_unbound_task(status: str | None, expected: str) -> None:
    raw: dict[str, Any] = {"title": "Write the runbook"}
    if status is not None:
        raw["status"] = status
    task = create_task(CreateTaskInput.model_validate(raw), task_id="t-1", space="s", now=NOW)
    assert task.status == expected
    assert task.binding is None
    assert task.version == TASK_VERSION
    assert (task.taskId, task.space, task.title) == ("t-1", "s", "Write the runbook")
    assert task.createdAt == task.updatedAt == NOW
    assert task.evidence == ()
    check_invariant(task)
    assert "brief" not in task.to_json()
    assert "binding" not in task.to_json()


@pytest.mark.parametrize("status", ["claimed", "blocked", "archived", None])
def test_create_task_refuses_bound_statuses_at_input_validation(status: str | None) -> None:
    with pytest.raises(ValidationError) as caught:
        CreateTaskInput.model_validate({"title": "x", "status": status})
    [error] = caught.value.errors()
    if status is None:
        assert "status may not be null" in error["msg"]
    else:
        assert error["loc"] == ("status",)
        assert error["type"] == "literal_error"


def test_create_task_has_no_binding_argument() -> None:
    with pytest.raises(ValidationError):
        CreateTaskInput.model_validate(
            {"title": "x", "binding": {"owner": "a", "actor": "b", "lifecycleUid": "c"}}
        )


def test_create_task_stamps_and_deduplicates_evidence() -> None:
    args = CreateTaskInput.model_validate(
        {
            "title": "x",
            "brief": "Before Friday.",
            "evidence": [
                {"kind": "commit", "ref": "9f2c1e7"},
                {"kind": "commit", "ref": "9f2c1e7"},
                {"kind": "branch", "ref": "9f2c1e7"},
            ],
        }
    )
    task = create_task(args, task_id="t-1", space="s", now=NOW)
    assert [(e.kind, e.ref, e.addedAt) for e in task.evidence] == [
        ("commit", "9f2c1e7", NOW),
        ("branch", "9f2c1e7", NOW),
    ]
    assert task.brief == "Before Friday."


def test_create_task_input_refuses_more_than_32_evidence_entries() -> None:
    evidence = [{"kind": "run", "ref": f"r{i}"} for i in range(MAX_EVIDENCE + 1)]
    with pytest.raises(ValidationError):
        CreateTaskInput.model_validate({"title": "x", "evidence": evidence})
    ok = CreateTaskInput.model_validate({"title": "x", "evidence": evidence[:MAX_EVIDENCE]})
    assert len(create_task(ok, task_id="t", space="s", now=NOW).evidence) == MAX_EVIDENCE


# --- claim-task (caller A) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("open/-", "claimed/A"),
        ("claimed/A", "same"),
        ("claimed/B", "conflict"),
        ("claimed/A2", "conflict"),
        ("blocked/A", "same"),
        ("blocked/B", "conflict"),
        ("done/-", "failed-precondition"),
        ("done/A", "same"),
        ("done/B", "conflict"),
        ("dropped/-", "failed-precondition"),
        ("dropped/A", "same"),
        ("dropped/B", "conflict"),
    ],
)
def test_claim_task(start: str, expected: str) -> None:
    caller = SEATS["A"]
    result = outcome_of(cell(start), lambda t: claim_task(t, caller, environment=None, now=NOW))
    assert result == expected


def test_claim_records_the_caller_as_binder() -> None:
    caller = SEATS["A"]
    task = claim_task(cell("open/-"), caller, environment="eu-west/pool-3", now=NOW)
    assert task.binding == TaskBinding(
        owner="acme",
        actor="builder",
        lifecycleUid="a" * 26,
        environment="eu-west/pool-3",
        boundAt=NOW,
        boundBy="acme.builder",
    )


def test_claim_by_the_same_triple_is_idempotent() -> None:
    caller = SEATS["A"]
    task = claim_task(cell("open/-"), caller, environment=None, now=NOW)
    again = claim_task(task, caller, environment="something-else", now=NOW + 50)
    assert again is task


# --- bind-task (target T, operator credential) ----------------------------------------

# Columns: expectedBinding absent, null, matching ref, mismatching ref.
BIND_TABLE: dict[str, tuple[str, str, str, str]] = {
    "open/-": ("claimed/T", "claimed/T", "conflict", "conflict"),
    "claimed/B": ("claimed/T", "conflict", "claimed/T", "conflict"),
    "blocked/B": ("blocked/T", "conflict", "blocked/T", "conflict"),
    "done/-": ("failed-precondition", "failed-precondition", "conflict", "conflict"),
    "done/B": ("failed-precondition", "conflict", "failed-precondition", "conflict"),
    "dropped/-": ("failed-precondition", "failed-precondition", "conflict", "conflict"),
    "dropped/B": ("failed-precondition", "conflict", "failed-precondition", "conflict"),
    # Already bound to the target: a bind that already holds returns the same record,
    # whatever expectedBinding asserted (bind-task is idempotent by taskId + target, so a
    # re-issue of a bind that succeeded must not turn into a conflict).
    "claimed/T": ("same", "same", "same", "same"),
    "blocked/T": ("same", "same", "same", "same"),
    "done/T": ("same", "same", "same", "same"),
    "dropped/T": ("same", "same", "same", "same"),
}


@pytest.mark.parametrize(
    ("start", "variant", "expected"), table_cases(BIND_TABLE, EXPECTED_VARIANTS)
)
def test_bind_task(start: str, variant: str, expected: str) -> None:
    task = cell(start)
    args = bind_input(task, variant)
    assert args.checks_binding is (variant != "absent")
    result = outcome_of(
        task,
        lambda t: bind_task(t, SEATS["T"], args, bound_by=OPERATOR, environment=None, now=NOW),
    )
    assert result == expected


def test_bind_records_the_target_and_the_binder() -> None:
    task = bind_task(
        cell("claimed/B"),
        SEATS["T"],
        BindTaskInput.model_validate({"taskId": TASK_ID}),
        bound_by=OPERATOR,
        environment=None,
        now=NOW,
    )
    assert task.binding is not None
    assert task.binding.ref() == BindingRef(owner="ops", actor="runner", lifecycleUid="t" * 32)
    assert task.binding.boundBy == OPERATOR
    assert task.binding.boundAt == NOW


def test_bind_to_the_same_triple_is_idempotent() -> None:
    args = BindTaskInput.model_validate({"taskId": TASK_ID})
    task = bind_task(cell("open/-"), SEATS["T"], args, bound_by=OPERATOR, environment=None, now=NOW)
    again = bind_task(task, SEATS["T"], args, bound_by="someone.else", environment="e", now=NOW)
    assert again is task


def test_bind_input_distinguishes_absent_from_null() -> None:
    assert not BindTaskInput.model_validate({"taskId": "t"}).checks_binding
    explicit_null = BindTaskInput.model_validate({"taskId": "t", "expectedBinding": None})
    assert explicit_null.checks_binding
    assert explicit_null.expectedBinding is None
