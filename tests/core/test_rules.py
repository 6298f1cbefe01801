"""The status-binding invariant and every write command's transition, cell by cell.

Outcome notation in the tables: ``"same"`` means the rule returned the very record it
was given (``result is task``); an error code string means ``ContractError`` with that
code; ``"<status>/<seat>"`` means the resulting status and the seat the result is bound to
(``-`` for no binding). Seats: ``A`` the acting seat, ``A2`` a new incarnation of ``A``
(same owner.actor, different lifecycle uid), ``B`` another seat, ``T`` a bind target,
``Z`` a seat no task is ever bound to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    MAX_EVIDENCE,
    STATUSES,
    TASK_VERSION,
    AdministerTaskInput,
    BindingRef,
    BindTaskInput,
    ContractError,
    CreateTaskInput,
    ErrorCode,
    Seat,
    Task,
    TaskBinding,
    TaskStatus,
    UpdateTaskInput,
    administer_task,
    bind_task,
    check_invariant,
    claim_task,
    create_task,
    new_binding,
    update_task,
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


VALID_CELLS = ["open/-", "claimed/A", "blocked/A", "done/-", "done/A", "dropped/-", "dropped/A"]
INVALID_CELLS = ["open/A", "claimed/-", "blocked/-"]


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
    ("start", "variant", "expected"),
    [
        (start, variant, row[index])
        for start, row in BIND_TABLE.items()
        for index, variant in enumerate(EXPECTED_VARIANTS)
    ],
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


# --- update-task ----------------------------------------------------------------------

UPDATE_ARGS = ["claimed", "blocked", "done", "dropped", "brief-only"]


def update_input(arg: str) -> UpdateTaskInput:
    if arg == "brief-only":
        return UpdateTaskInput.model_validate({"taskId": TASK_ID, "brief": "New brief."})
    return UpdateTaskInput.model_validate({"taskId": TASK_ID, "status": arg})


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


# --- administer-task ------------------------------------------------------------------

ADMIN_ACTIONS = [
    *(f"status:{s}" for s in STATUSES),
    "unbind",
    *(f"unbind+status:{s}" for s in STATUSES),
]

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


def admin_input(action: str, **extra: Any) -> AdministerTaskInput:
    raw: dict[str, Any] = {"taskId": TASK_ID, **extra}
    if action.startswith("unbind"):
        raw["unbind"] = True
    if "status:" in action:
        raw["status"] = action.split("status:", 1)[1]
    return AdministerTaskInput.model_validate(raw)


@pytest.mark.parametrize(
    ("start", "action", "expected"),
    [
        (start, action, row[index])
        for start, row in ADMIN_TABLE.items()
        for index, action in enumerate(ADMIN_ACTIONS)
    ],
)
def test_administer_task(start: str, action: str, expected: str) -> None:
    args = admin_input(action)
    result = outcome_of(cell(start), lambda t: administer_task(t, args, now=NOW))
    assert result == expected


@pytest.mark.parametrize(
    ("start", "action"),
    [
        (start, action)
        for start, row in ADMIN_TABLE.items()
        for index, action in enumerate(ADMIN_ACTIONS)
        if row[index] == "same"
    ],
)
def test_administer_no_op_with_a_note_is_a_write(start: str, action: str) -> None:
    task = cell(start)
    result = administer_task(task, admin_input(action, note="Checked."), now=NOW)
    assert result is not task
    assert result.updatedAt == NOW
    assert result.model_dump(exclude={"updatedAt"}) == task.model_dump(exclude={"updatedAt"})


@pytest.mark.parametrize(
    ("start", "action", "expected"),
    [
        (start, action, row[index])
        for start, row in ADMIN_TABLE.items()
        for index, action in enumerate(ADMIN_ACTIONS)
        if row[index] != "same"
    ],
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


# --- environment: admitted, absent, withheld ------------------------------------------


@pytest.mark.parametrize(
    "environment",
    [
        "eu-west/pool-3",
        "env://zone-1/café ☕ 🚀",
        "k8s:cluster-a/ns-b",
        "https://envs.example.com/e/42?page=2",
        "é" * 1024,  # exactly 2048 bytes
        "😀" * 512,  # exactly 2048 bytes
    ],
)
def test_environment_admitted_verbatim(environment: str) -> None:
    binding = new_binding(SEATS["A"], bound_by="acme.builder", environment=environment, now=NOW)
    assert binding.environment == environment
    assert binding.environment.encode("utf-8") == environment.encode("utf-8")
    assert binding.environmentWithheld is None
    wire = binding.to_json()
    assert wire["environment"] == environment
    assert "environmentWithheld" not in wire


def test_environment_absent_omits_both_fields() -> None:
    binding = new_binding(SEATS["A"], bound_by="acme.builder", environment=None, now=NOW)
    wire = binding.to_json()
    assert "environment" not in wire
    assert "environmentWithheld" not in wire
    assert wire == {
        "owner": "acme",
        "actor": "builder",
        "lifecycleUid": "a" * 26,
        "boundAt": NOW,
        "boundBy": "acme.builder",
    }


@pytest.mark.parametrize(
    "environment",
    [
        "https://user:pw@envs.example.com/e/42",
        "https://envs.example.com/e/42?token=abc",
        "Bearer abc",
        "token=abc",
        "é" * 1024 + "a",  # 2049 bytes
        "a" * 2049,
        "pool\n3",
    ],
)
def test_environment_refused_is_withheld_and_never_blocks_the_binding(environment: str) -> None:
    binding = new_binding(SEATS["A"], bound_by="acme.builder", environment=environment, now=NOW)
    assert binding.environment is None
    assert binding.environmentWithheld is True
    wire = binding.to_json()
    assert wire["environmentWithheld"] is True
    assert "environment" not in wire
    assert binding.ref() == SEATS_REF_A

    claimed = claim_task(cell("open/-"), SEATS["A"], environment=environment, now=NOW)
    assert claimed.status == "claimed"
    assert claimed.binding is not None
    assert claimed.binding.environmentWithheld is True
    assert claimed.binding.environment is None

    bound = bind_task(
        cell("open/-"),
        SEATS["T"],
        BindTaskInput.model_validate({"taskId": TASK_ID, "expectedBinding": None}),
        bound_by=OPERATOR,
        environment=environment,
        now=NOW,
    )
    assert bound.status == "claimed"
    assert bound.binding is not None
    assert bound.binding.environmentWithheld is True
    assert environment not in str(bound.to_json())


SEATS_REF_A = BindingRef(owner="acme", actor="builder", lifecycleUid="a" * 26)


def test_binding_refuses_environment_withheld_false() -> None:
    with pytest.raises(ValidationError):
        TaskBinding.model_validate(
            {
                "owner": "acme",
                "actor": "builder",
                "lifecycleUid": "a" * 26,
                "environmentWithheld": False,
                "boundAt": 1,
                "boundBy": "acme.builder",
            }
        )


# --- section 6: the positive path, and a new incarnation ---------------------------------


def test_positive_path_from_creation_to_done() -> None:
    seat = SEATS["A"]
    task = create_task(
        CreateTaskInput.model_validate({"title": "Ship it"}), task_id=TASK_ID, space="s", now=10
    )
    claimed = claim_task(task, seat, environment="eu-west/pool-3", now=20)
    assert claimed.status == "claimed"
    assert claimed.binding is not None
    assert claimed.binding.ref() == SEATS_REF_A

    blocked = update_task(
        claimed,
        seat,
        UpdateTaskInput.model_validate(
            {"taskId": TASK_ID, "status": "blocked", "note": "Waiting on review."}
        ),
        now=30,
    )
    assert blocked.status == "blocked"
    assert blocked.binding == claimed.binding

    with_evidence = update_task(
        blocked,
        seat,
        UpdateTaskInput.model_validate(
            {"taskId": TASK_ID, "evidence": [{"kind": "commit", "ref": "9f2c1e7 ✓"}]}
        ),
        now=40,
    )
    assert [(e.kind, e.ref, e.addedAt) for e in with_evidence.evidence] == [
        ("commit", "9f2c1e7 ✓", 40)
    ]

    done = update_task(with_evidence, seat, update_input("done"), now=50)
    assert done.status == "done"
    assert done.binding == claimed.binding  # the record of who finished the work
    assert done.evidence == with_evidence.evidence
    assert (done.createdAt, done.updatedAt) == (10, 50)


def test_a_new_incarnation_is_a_different_seat() -> None:
    old, new = SEATS["A"], SEATS["A2"]
    assert (old.owner, old.actor) == (new.owner, new.actor)
    task = claim_task(cell("open/-"), old, environment=None, now=NOW)
    with pytest.raises(ContractError) as denied:
        update_task(task, new, update_input("done"), now=NOW)
    assert denied.value.code is ErrorCode.PERMISSION_DENIED
    with pytest.raises(ContractError) as refused:
        claim_task(task, new, environment=None, now=NOW)
    assert refused.value.code is ErrorCode.CONFLICT
    # The task keeps the old binding until an operator moves or frees it.
    assert task.binding is not None
    assert task.binding.lifecycleUid == old.lifecycleUid
    moved = bind_task(
        task,
        new,
        BindTaskInput.model_validate(
            {"taskId": TASK_ID, "expectedBinding": task.binding.ref().to_json()}
        ),
        bound_by=OPERATOR,
        environment=None,
        now=NOW + 1,
    )
    assert moved.binding is not None
    assert moved.binding.lifecycleUid == new.lifecycleUid
    assert update_task(moved, new, update_input("done"), now=NOW + 2).status == "done"
