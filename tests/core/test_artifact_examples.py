"""Examples, invalid inputs and outputs that the schemas and the models agree on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from cotal_tasks.core import (
    COMMANDS,
    BindTaskInput,
    CreateTaskInput,
    Seat,
    StaleMarker,
    Task,
    TaskPage,
    UpdateTaskInput,
    claim_task,
    contract_artifacts,
    create_task,
    update_task,
)
from tests.core.artifacts_support import input_validator

# --- examples and invalid inputs: schema and model agree ----------------------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_example_validates_against_schema_and_model(command: str) -> None:
    spec = COMMANDS[command]
    example = json.loads(json.dumps(dict(spec.example)))
    input_validator(command).validate(example)
    parsed = spec.input.model_validate(example)
    assert parsed.to_json() == {k: v for k, v in example.items() if v is not None}


def _invalid_inputs() -> Iterator[tuple[str, dict[str, Any]]]:
    for command, spec in COMMANDS.items():
        example = dict(spec.example)
        yield command, {**example, "unexpected": 1}
        if "taskId" in spec.input.model_fields:
            yield command, {**example, "taskId": 7}
            yield command, {k: v for k, v in example.items() if k != "taskId"}
            yield command, {**example, "taskId": ""}
            yield command, {**example, "taskId": "a\nb"}
        if "limit" in spec.input.model_fields:
            yield command, {**example, "limit": "5"}
            yield command, {**example, "limit": 0}
            yield command, {**example, "cursor": "not a cursor!"}
    yield "create-task", {"title": "x", "status": "claimed"}
    yield "create-task", {"title": "x", "status": "blocked"}
    yield "create-task", {"title": "x", "brief": None}
    yield "create-task", {"title": 7}
    yield "create-task", {"title": "x", "evidence": [{"kind": "patch", "ref": "p"}]}
    yield "create-task", {"title": "x", "evidence": [{"kind": "run", "ref": "r", "addedAt": 1}]}
    yield (
        "create-task",
        {"title": "x", "evidence": [{"kind": "run", "ref": f"{i}"} for i in range(33)]},
    )
    yield "update-task", {"taskId": "t", "status": "open"}
    yield "update-task", {"taskId": "t", "note": None}
    yield "administer-task", {"taskId": "t", "unbind": False}
    yield "administer-task", {"taskId": "t", "status": "archived"}
    yield "bind-task", {"taskId": "t", "expectedBinding": {"owner": "a", "actor": "b"}}
    yield "bind-task", {"taskId": "t", "expectedBinding": "a.b/c"}
    yield "list-tasks", {"status": []}
    yield "list-tasks", {"status": ["open", "archived"]}
    yield "list-tasks", {"limit": None}


@pytest.mark.parametrize(("command", "raw"), list(_invalid_inputs()))
def test_invalid_input_is_refused_by_schema_and_model(command: str, raw: dict[str, Any]) -> None:
    assert not input_validator(command).is_valid(raw)
    with pytest.raises(ValidationError):
        COMMANDS[command].input.model_validate(raw)


@pytest.mark.parametrize(
    ("command", "raw"),
    [
        ("create-task", {"title": "x"}),
        ("create-task", {"title": "x", "status": "dropped", "evidence": []}),
        ("bind-task", {"taskId": "t"}),
        (
            "bind-task",
            {"taskId": "t", "expectedBinding": {"owner": "a", "actor": "b", "lifecycleUid": "c"}},
        ),
        ("update-task", {"taskId": "t", "status": "blocked", "note": "Waiting on review."}),
        ("administer-task", {"taskId": "t", "status": "open", "unbind": True}),
        ("list-tasks", {}),
        ("list-tasks", {"cursor": "abc_-123", "limit": 2_147_483_647, "status": ["done"]}),
        ("my-tasks", {}),
    ],
)
def test_valid_input_is_admitted_by_schema_and_model(command: str, raw: dict[str, Any]) -> None:
    assert input_validator(command).is_valid(raw)
    assert COMMANDS[command].input.model_validate(raw).to_json() == raw


def test_example_inputs_carry_no_credential() -> None:
    for spec in COMMANDS.values():
        assert "token" not in json.dumps(dict(spec.example)).lower()


# --- outputs validate against their schemas ------------------------------------------------


def _outputinput_validator(command: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(contract_artifacts().outputs[command].root.data))


def test_created_task_validates_against_the_get_task_output_schema() -> None:
    args = CreateTaskInput.model_validate(
        {
            "title": "Rotate the staging certificates",
            "brief": "Before Friday. ☕",
            "evidence": [{"kind": "commit", "ref": "9f2c1e7"}],
        }
    )
    task = create_task(args, task_id="b-7k2m9q", space="space-1", now=1_700_000_000_000)
    wire = task.to_json()
    _outputinput_validator("get-task").validate(wire)
    _outputinput_validator("create-task").validate(wire)
    assert Task.model_validate(wire) == task


def test_bound_task_with_withheld_environment_validates_against_the_output_schema() -> None:
    seat = Seat("acme", "builder", "a" * 26)
    created = create_task(
        CreateTaskInput.model_validate({"title": "x"}), task_id="t", space="s", now=1
    )
    claimed = claim_task(created, seat, environment="https://u:p@host/", now=2)
    updated = update_task(
        claimed,
        seat,
        UpdateTaskInput.model_validate(
            {"taskId": "t", "status": "blocked", "evidence": [{"kind": "run", "ref": "ci/1"}]}
        ),
        now=3,
    )
    wire: dict[str, Any] = updated.to_json()
    assert wire["binding"]["environmentWithheld"] is True
    for command in ("get-task", "claim-task", "update-task", "bind-task", "administer-task"):
        _outputinput_validator(command).validate(wire)
    broken = {**wire, "binding": {**wire["binding"], "environmentWithheld": False}}
    assert not _outputinput_validator("get-task").is_valid(broken)


def test_page_validates_against_the_list_output_schema() -> None:
    created = create_task(
        CreateTaskInput.model_validate({"title": "x"}), task_id="t", space="s", now=1
    )
    page = TaskPage(
        tasks=(created.summary(),),
        appliedLimit=50,
        nextCursor="abc",
        observedAt=5,
        changeSeq=9,
        stale=StaleMarker(staleAsOf=4, reason="tracker sync is failing"),
    )
    wire: dict[str, Any] = page.to_json()
    _outputinput_validator("list-tasks").validate(wire)
    _outputinput_validator("my-tasks").validate(wire)
    assert "brief" not in wire["tasks"][0]
    assert "evidence" not in wire["tasks"][0]
    assert not _outputinput_validator("list-tasks").is_valid({**wire, "tasks": [created.to_json()]})


def test_bind_input_model_and_schema_agree_on_expected_binding_null() -> None:
    raw: dict[str, Any] = {"taskId": "t", "expectedBinding": None}
    input_validator("bind-task").validate(raw)
    assert BindTaskInput.model_validate(raw).checks_binding
