"""The binding's environment (admitted, absent, withheld) and section 6's positive path
and new incarnation, through the rules alone (notation: ``test_rules.py``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cotal_tasks.core import (
    BindingRef,
    BindTaskInput,
    ContractError,
    CreateTaskInput,
    ErrorCode,
    TaskBinding,
    UpdateTaskInput,
    bind_task,
    claim_task,
    create_task,
    new_binding,
    update_task,
)
from tests.core.rules_support import NOW, OPERATOR, SEATS, TASK_ID, cell, update_input

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
