"""update-task, cell by cell, and the evidence it appends (notation: ``test_rules.py``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    MAX_EVIDENCE,
    ContractError,
    ErrorCode,
    UpdateTaskInput,
    claim_task,
    update_task,
)
from tests.core.rules_support import (
    NOW,
    SEATS,
    TASK_ID,
    UPDATE_ARGS,
    cell,
    make,
    outcome_of,
    update_input,
)

# --- update-task ----------------------------------------------------------------------


def _update_cases() -> list[tuple[str, str, str, str]]:
    cases: list[tuple[str, str, str, str]] = []
    for status in ("claimed", "blocked", "done", "dropped"):
        start = f"{status}/A"
        for arg in UPDATE_ARGS:
            if arg == "brief-only":
                expected = f"{status}/A"
            else:
                expected = "same" if arg == status else f"{arg}/A"
            cases.append((start, "A", arg, expected))  # the bound seat
            cases.append((start, "B", arg, "permission-denied"))  # another seat
            cases.append((start, "A2", arg, "permission-denied"))  # a new incarnation
    for start in ("open/-", "done/-", "dropped/-"):  # nobody is bound
        for arg in UPDATE_ARGS:
            cases.append((start, "A", arg, "permission-denied"))
    return cases


@pytest.mark.parametrize(("start", "caller", "arg", "expected"), _update_cases())
def test_update_task(start: str, caller: str, arg: str, expected: str) -> None:
    task = cell(start)
    args = update_input(arg)
    result = outcome_of(task, lambda t: update_task(t, SEATS[caller], args, now=NOW))
    assert result == expected


def test_update_keeps_the_binding_byte_for_byte() -> None:
    task = claim_task(cell("open/-"), SEATS["A"], environment="pool-é-☕", now=NOW)
    done = update_task(task, SEATS["A"], update_input("done"), now=NOW + 10)
    assert done.status == "done"
    assert done.binding == task.binding
    assert done.updatedAt == NOW + 10


def test_update_task_refuses_open_at_input_validation() -> None:
    with pytest.raises(ValidationError) as caught:
        UpdateTaskInput.model_validate({"taskId": TASK_ID, "status": "open"})
    assert caught.value.errors()[0]["loc"] == ("status",)


def test_update_denial_names_the_seat_and_the_remedy() -> None:
    with pytest.raises(ContractError) as caught:
        update_task(cell("claimed/A"), SEATS["A2"], update_input("done"), now=NOW)
    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    assert str(SEATS["A2"]) in caught.value.message
    assert "new incarnation" in caught.value.message


def test_update_with_nothing_new_returns_the_same_record() -> None:
    task = cell("claimed/A")
    same_status = UpdateTaskInput.model_validate({"taskId": TASK_ID, "status": "claimed"})
    assert update_task(task, SEATS["A"], same_status, now=NOW) is task
    same_brief = UpdateTaskInput.model_validate({"taskId": TASK_ID, "brief": "B."})
    briefed = update_task(task, SEATS["A"], same_brief, now=NOW)
    assert update_task(briefed, SEATS["A"], same_brief, now=NOW + 1) is briefed


def test_update_with_a_note_alone_is_a_write() -> None:
    # A note lands in the history, so it is a write: updatedAt moves, nothing else does.
    task = cell("claimed/A")
    note_only = UpdateTaskInput.model_validate({"taskId": TASK_ID, "note": "Still on it."})
    result = update_task(task, SEATS["A"], note_only, now=NOW)
    assert result is not task
    assert result.updatedAt == NOW
    assert result.model_dump(exclude={"updatedAt"}) == task.model_dump(exclude={"updatedAt"})
    with pytest.raises(ContractError) as caught:
        update_task(task, SEATS["B"], note_only, now=NOW)
    assert caught.value.code is ErrorCode.PERMISSION_DENIED


def test_update_does_not_move_updated_at_backwards() -> None:
    task = make("claimed", "A", updatedAt=5_000)
    result = update_task(task, SEATS["A"], update_input("blocked"), now=NOW)
    assert result.updatedAt == 5_000


# --- evidence -------------------------------------------------------------------------


def _evidence_update(*items: tuple[str, str]) -> UpdateTaskInput:
    return UpdateTaskInput.model_validate(
        {"taskId": TASK_ID, "evidence": [{"kind": k, "ref": r} for k, r in items]}
    )


def test_evidence_is_appended_with_added_at_and_nothing_else_disturbed() -> None:
    task = make(
        "claimed",
        "A",
        evidence=[{"kind": "branch", "ref": "feature/x", "addedAt": 120}],
    )
    result = update_task(
        task, SEATS["A"], _evidence_update(("commit", "9f2c1e7 ☕"), ("run", "ci/42")), now=NOW
    )
    assert [(e.kind, e.ref, e.addedAt) for e in result.evidence] == [
        ("branch", "feature/x", 120),
        ("commit", "9f2c1e7 ☕", NOW),
        ("run", "ci/42", NOW),
    ]
    assert result.status == "claimed"
    assert result.binding == task.binding


def test_identical_evidence_is_not_added_twice() -> None:
    task = make("claimed", "A", evidence=[{"kind": "commit", "ref": "abc", "addedAt": 120}])
    # Already present: nothing changes, so the very record comes back.
    assert update_task(task, SEATS["A"], _evidence_update(("commit", "abc")), now=NOW) is task
    # Twice within one request: added once. Same ref under another kind is different.
    result = update_task(
        task,
        SEATS["A"],
        _evidence_update(("review", "pr/7"), ("review", "pr/7"), ("branch", "abc")),
        now=NOW,
    )
    assert [(e.kind, e.ref) for e in result.evidence] == [
        ("commit", "abc"),
        ("review", "pr/7"),
        ("branch", "abc"),
    ]


def test_evidence_over_32_is_bad_request_and_the_task_is_unchanged() -> None:
    existing = [{"kind": "commit", "ref": f"c{i}", "addedAt": 120} for i in range(30)]
    task = make("claimed", "A", evidence=existing)
    before = task.model_dump()
    with pytest.raises(ContractError) as caught:
        update_task(
            task, SEATS["A"], _evidence_update(("run", "r1"), ("run", "r2"), ("run", "r3")), now=NOW
        )
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "33 evidence entries" in caught.value.message
    assert "limit of 32" in caught.value.message
    assert task.model_dump() == before
    # Exactly 32 is fine; duplicates of existing entries do not count towards the limit.
    ok = update_task(
        task, SEATS["A"], _evidence_update(("run", "r1"), ("run", "r2"), ("commit", "c0")), now=NOW
    )
    assert len(ok.evidence) == MAX_EVIDENCE


def test_update_input_refuses_more_than_32_evidence_entries() -> None:
    with pytest.raises(ValidationError):
        _evidence_update(*[("run", f"r{i}") for i in range(MAX_EVIDENCE + 1)])
