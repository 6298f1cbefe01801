"""The cluster document and every schema: canonical bytes, digests, manifests, the command
table of section 1, JSON Schema 2020-12 validity, closed objects, safe patterns, and
examples and outputs that the schemas and the models agree on."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from cotal_tasks.core import (
    BOARD_CHANGED,
    BOARD_CHANGED_TOPIC,
    CAPABILITIES,
    CLUSTER_REVISION,
    CLUSTER_URN,
    COMMANDS,
    BindTaskInput,
    BoardChanged,
    Closure,
    CreateTaskInput,
    Seat,
    StaleMarker,
    Task,
    TaskPage,
    UpdateTaskInput,
    canonical_json,
    claim_task,
    contract_artifacts,
    create_task,
    digest,
    json_schema,
    update_task,
)
from cotal_tasks.core.artifacts import cluster_document, manifest_for

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Section 1's command table: class, targeting (modes), capability, in the contract's order.
CONTRACT_TABLE: list[tuple[str, tuple[str, ...], str]] = [
    ("list-tasks", (), "tasks.read"),
    ("get-task", (), "tasks.read"),
    ("my-tasks", ("self",), "tasks.self"),
    ("create-task", (), "tasks.write"),
    ("bind-task", ("owner", "any"), "tasks.bind"),
    ("claim-task", ("self",), "tasks.self"),
    ("update-task", ("self",), "tasks.self"),
    ("administer-task", (), "tasks.admin"),
]


def every_schema() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every published schema, by a readable name, decoded from its published bytes."""
    artifacts = contract_artifacts()
    for name, closure in artifacts.inputs.items():
        yield f"{name} input", json.loads(closure.root.data)
    for name, closure in artifacts.outputs.items():
        yield f"{name} output", json.loads(closure.root.data)
    yield f"{BOARD_CHANGED} event", json.loads(artifacts.event.root.data)


SCHEMAS = list(every_schema())
SCHEMA_IDS = [name for name, _ in SCHEMAS]


def every_closure() -> Iterator[tuple[str, Closure]]:
    artifacts = contract_artifacts()
    for name, closure in artifacts.inputs.items():
        yield f"{name} input", closure
    for name, closure in artifacts.outputs.items():
        yield f"{name} output", closure
    yield "event", artifacts.event
    yield "cluster", artifacts.cluster


CLOSURES = list(every_closure())
CLOSURE_IDS = [name for name, _ in CLOSURES]


# --- canonical bytes and digests -------------------------------------------------------


@pytest.mark.parametrize(("name", "closure"), CLOSURES, ids=CLOSURE_IDS)
def test_bytes_are_canonical_and_digests_recompute(name: str, closure: Closure) -> None:
    for artifact in (closure.root, closure.manifest):
        assert canonical_json(json.loads(artifact.data)) == artifact.data
        assert artifact.digest == "sha256:" + hashlib.sha256(artifact.data).hexdigest()
        assert artifact.digest == digest(artifact.data)
        assert artifact.hex == hashlib.sha256(artifact.data).hexdigest()
        # No floats and only ASCII keys: JCS here is sorted keys, no whitespace.
        plain = json.dumps(
            json.loads(artifact.data), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        assert plain == artifact.data
    assert json.loads(closure.manifest.data) == {
        "v": 1,
        "root": closure.root.digest,
        "members": [],
    }
    assert closure.digest == closure.manifest.digest
    assert closure.manifest.data == canonical_json(manifest_for(closure.root.digest))


def test_building_twice_gives_identical_bytes() -> None:
    artifacts = contract_artifacts()
    inputs = {name: Closure.of(json_schema(spec.input)) for name, spec in COMMANDS.items()}
    outputs = {name: Closure.of(json_schema(spec.output)) for name, spec in COMMANDS.items()}
    event = Closure.of(json_schema(BoardChanged))
    for name in COMMANDS:
        assert inputs[name].root.data == artifacts.inputs[name].root.data
        assert inputs[name].manifest.data == artifacts.inputs[name].manifest.data
        assert outputs[name].root.data == artifacts.outputs[name].root.data
    assert event.root.data == artifacts.event.root.data
    document = cluster_document(inputs, outputs, event)
    assert document == artifacts.document
    rebuilt = Closure.of(document)
    assert rebuilt.root.data == artifacts.cluster.root.data
    assert rebuilt.digest == artifacts.cluster.digest
    assert artifacts.cluster.root.data == canonical_json(artifacts.document)


def test_cluster_digest_is_the_same_in_another_process() -> None:
    program = (
        "from cotal_tasks.core import contract_artifacts as c; "
        "a = c(); print(a.cluster.digest); "
        "print(*(x.digest for x in a.all()))"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=60,
    )
    cluster, everything = result.stdout.splitlines()
    artifacts = contract_artifacts()
    assert cluster == artifacts.cluster.digest
    assert everything.split() == [artifact.digest for artifact in artifacts.all()]


def test_all_lists_every_artifact_once_with_the_document_last() -> None:
    artifacts = contract_artifacts()
    published = artifacts.all()
    digests = [artifact.digest for artifact in published]
    assert len(digests) == len(set(digests))
    assert published[-2:] == (artifacts.cluster.root, artifacts.cluster.manifest)
    expected: set[str] = set()
    for _, closure in CLOSURES:
        expected |= {closure.root.digest, closure.manifest.digest}
    assert set(digests) == expected
    for artifact in published:
        assert artifact.digest == digest(artifact.data)


# --- the cluster document --------------------------------------------------------------


def test_cluster_document_identity() -> None:
    document = contract_artifacts().document
    assert document["urn"] == "ai.cotal.tasks" == CLUSTER_URN
    assert document["revision"] == 1 == CLUSTER_REVISION
    assert document["attributes"] == []
    assert re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", document["urn"])
    assert set(document) == {"urn", "revision", "attributes", "events", "commands"}


def test_cluster_document_commands_match_the_contract_table() -> None:
    commands = contract_artifacts().document["commands"]
    assert len(commands) == 8
    shapes = [
        (row["name"], row["class"], row["targeted"], tuple(row.get("modes", ())), row["capability"])
        for row in commands
    ]
    assert shapes == [
        (name, "ephemeral", bool(modes), modes, capability)
        for name, modes, capability in CONTRACT_TABLE
    ]


@pytest.mark.parametrize("row", contract_artifacts().document["commands"], ids=lambda r: r["name"])
def test_command_row_is_well_formed(row: dict[str, Any]) -> None:
    artifacts = contract_artifacts()
    name = row["name"]
    assert "effect" not in row
    assert "admissionCeiling" not in row
    assert "action" not in row
    assert ("modes" in row) is row["targeted"]
    if row["targeted"]:
        assert row["modes"]
        assert len(set(row["modes"])) == len(row["modes"])
        assert set(row["modes"]) <= {"self", "owner", "any"}
    assert re.fullmatch(r"[a-z][a-z0-9._-]{0,63}", row["capability"])
    assert row["capability"] in CAPABILITIES
    assert re.fullmatch(r"[a-z0-9-]{1,32}", name)
    assert name not in ("describe", "cancel")
    assert row["inputDigest"] == artifacts.inputs[name].digest
    assert row["outputDigest"] == artifacts.outputs[name].digest
    assert row["inputDigest"] == Closure.of(json_schema(COMMANDS[name].input)).digest
    assert row["outputDigest"] == Closure.of(json_schema(COMMANDS[name].output)).digest
    assert set(row) <= {
        "name",
        "class",
        "targeted",
        "modes",
        "capability",
        "inputDigest",
        "outputDigest",
    }


def test_no_effect_anywhere_in_the_document() -> None:
    assert b'"effect"' not in contract_artifacts().cluster.root.data


def test_command_names_are_unique() -> None:
    names = [row["name"] for row in contract_artifacts().document["commands"]]
    assert len(names) == len(set(names))
    assert names == list(COMMANDS)


def test_board_changed_event_row() -> None:
    artifacts = contract_artifacts()
    assert artifacts.document["events"] == [
        {
            "name": "board-changed",
            "topic": "ev.ai_cotal_tasks.board-changed",
            "dataDigest": artifacts.event.digest,
        }
    ]
    assert BOARD_CHANGED_TOPIC == "ev.ai_cotal_tasks.board-changed"
    schema = json.loads(artifacts.event.root.data)
    assert set(schema["properties"]) == {"changeSeq", "observedAt"}
    assert set(schema["required"]) == {"changeSeq", "observedAt"}
    validator = Draft202012Validator(schema)
    payload = BoardChanged(changeSeq=3, observedAt=1_700_000_000_000).to_json()
    validator.validate(payload)
    assert not validator.is_valid({**payload, "taskId": "t-1"})


# --- schemas: 2020-12, closed, no format, safe patterns ----------------------------------

_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")


def walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in ``node`` (property-name maps are not schemas themselves)."""
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
        return
    if not isinstance(node, dict):
        return
    yield node
    for key, value in node.items():
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                yield from walk(sub)
        elif key not in ("const", "enum", "required", "examples"):
            yield from walk(value)


_QUANTIFIER = re.compile(r"[*+?]|\{\d+(,\d*)?\}")


def pattern_problems(pattern: str) -> list[str]:
    """Why ``pattern`` fails Cotal's ``assertSafePattern``: nested quantifiers,
    lookarounds or backreferences. Empty when it is safe."""
    problems: list[str] = []
    groups: list[bool] = [False]  # per open group: does it contain a quantifier?
    previous_group_quantified = False
    previous_was_quantifier = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            following = pattern[i + 1 : i + 2]
            if (following.isdigit() and following != "0") or following == "k":
                problems.append(f"backreference at {i}")
            i += 2
            previous_group_quantified = previous_was_quantifier = False
            continue
        if char == "[":
            i += 1
            if pattern[i : i + 1] == "^":
                i += 1
            if pattern[i : i + 1] == "]":
                i += 1
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            previous_group_quantified = previous_was_quantifier = False
            continue
        if char == "(":
            for look in ("(?=", "(?!", "(?<=", "(?<!"):
                if pattern.startswith(look, i):
                    problems.append(f"lookaround at {i}")
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                i = pattern.index(">", i) + 1
            elif pattern.startswith("(?", i):
                i += 3 if pattern[i + 2 : i + 3] in (":", "=", "!") else 4
            else:
                i += 1
            groups.append(False)
            previous_group_quantified = previous_was_quantifier = False
            continue
        if char == ")":
            inner = groups.pop()
            if inner:
                groups[-1] = True
            previous_group_quantified = inner
            previous_was_quantifier = False
            i += 1
            continue
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier is not None:
            if char == "?" and previous_was_quantifier:  # a lazy modifier, not a quantifier
                i += 1
                continue
            if previous_group_quantified:
                problems.append(f"nested quantifier at {i}")
            groups[-1] = True
            previous_group_quantified = False
            previous_was_quantifier = True
            i = quantifier.end()
            continue
        previous_group_quantified = previous_was_quantifier = False
        i += 1
    return problems


@pytest.mark.parametrize(
    ("pattern", "safe"),
    [
        ("^[A-Za-z0-9_-]+$", True),
        ("^[^\\u0000-\\u001f\\u007f-\\u009f]*$", True),
        ("(ab)+", True),
        ("(?:a|b){2,5}x*", True),
        ("[(+]+", True),
        ("a+?b", True),
        ("(a+)+", False),
        ("(a*)*", False),
        ("(?:ab+){2,}", False),
        ("((a)+)*", False),
        ("(?=x)a", False),
        ("a(?!x)", False),
        ("(?<=x)a", False),
        ("(?<!x)a", False),
        ("(a)\\1", False),
        ("(?<n>a)\\k<n>", False),
    ],
)
def test_pattern_checker(pattern: str, safe: bool) -> None:
    assert (pattern_problems(pattern) == []) is safe


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=SCHEMA_IDS)
def test_schema_is_valid_2020_12(name: str, schema: dict[str, Any]) -> None:
    assert schema["$schema"] == DIALECT
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=SCHEMA_IDS)
def test_schema_objects_are_closed(name: str, schema: dict[str, Any]) -> None:
    objects = [
        node for node in walk(schema) if node.get("type") == "object" or "properties" in node
    ]
    assert objects
    for node in objects:
        assert node.get("additionalProperties") is False, node
        assert set(node.get("required", ())) <= set(node.get("properties", {}))


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=SCHEMA_IDS)
def test_schema_has_no_format_and_only_local_refs(name: str, schema: dict[str, Any]) -> None:
    for node in walk(schema):
        assert "format" not in node
        assert not {"title", "description", "default"} & set(node), node
        if "$ref" in node:
            assert node["$ref"].startswith("#/$defs/")
            assert node["$ref"].removeprefix("#/$defs/") in schema["$defs"]


@pytest.mark.parametrize(("name", "schema"), SCHEMAS, ids=SCHEMA_IDS)
def test_schema_patterns_are_safe(name: str, schema: dict[str, Any]) -> None:
    patterns = [node["pattern"] for node in walk(schema) if "pattern" in node]
    for pattern in patterns:
        assert pattern_problems(pattern) == [], pattern
        re.compile(pattern)


def test_schema_nullable_only_where_a_command_gives_null_a_meaning() -> None:
    for name, schema in SCHEMAS:
        for node in walk(schema):
            branches = node.get("anyOf", ())
            if {"type": "null"} in branches:
                assert name == "bind-task input"
                assert node is schema["properties"]["expectedBinding"]


# --- examples and invalid inputs: schema and model agree ----------------------------------


def _validator(command: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(contract_artifacts().inputs[command].root.data))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_example_validates_against_schema_and_model(command: str) -> None:
    spec = COMMANDS[command]
    example = json.loads(json.dumps(dict(spec.example)))
    _validator(command).validate(example)
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
    assert not _validator(command).is_valid(raw)
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
    assert _validator(command).is_valid(raw)
    assert COMMANDS[command].input.model_validate(raw).to_json() == raw


def test_example_inputs_carry_no_credential() -> None:
    for spec in COMMANDS.values():
        assert "token" not in json.dumps(dict(spec.example)).lower()


# --- outputs validate against their schemas ------------------------------------------------


def _output_validator(command: str) -> Draft202012Validator:
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
    _output_validator("get-task").validate(wire)
    _output_validator("create-task").validate(wire)
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
        _output_validator(command).validate(wire)
    broken = {**wire, "binding": {**wire["binding"], "environmentWithheld": False}}
    assert not _output_validator("get-task").is_valid(broken)


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
    _output_validator("list-tasks").validate(wire)
    _output_validator("my-tasks").validate(wire)
    assert "brief" not in wire["tasks"][0]
    assert "evidence" not in wire["tasks"][0]
    assert not _output_validator("list-tasks").is_valid({**wire, "tasks": [created.to_json()]})


def test_bind_input_model_and_schema_agree_on_expected_binding_null() -> None:
    raw: dict[str, Any] = {"taskId": "t", "expectedBinding": None}
    _validator("bind-task").validate(raw)
    assert BindTaskInput.model_validate(raw).checks_binding


# --- the command table as data ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "effect", "targeting", "idempotency"),
    [
        ("list-tasks", "read", "untargeted", "none"),
        ("get-task", "read", "untargeted", "none"),
        ("my-tasks", "read", "targeted, mode self", "none"),
        ("create-task", "write", "untargeted", "envelope-id"),
        ("bind-task", "write", "targeted, modes owner and any", "task-and-target"),
        ("claim-task", "write", "targeted, mode self", "task-and-caller"),
        ("update-task", "write", "targeted, mode self", "envelope-id"),
        ("administer-task", "write", "untargeted", "envelope-id"),
    ],
)
def test_command_spec_matches_the_contract_table(
    command: str, effect: str, targeting: str, idempotency: str
) -> None:
    spec = COMMANDS[command]
    assert spec.name == command
    assert spec.cls == "ephemeral"
    assert spec.effect == effect
    assert spec.targeting() == targeting
    assert spec.idempotency == idempotency
    assert spec.targeted is (targeting != "untargeted")


def test_capabilities_are_the_five_tiers() -> None:
    assert CAPABILITIES == ("tasks.read", "tasks.self", "tasks.write", "tasks.bind", "tasks.admin")
    assert {spec.capability for spec in COMMANDS.values()} == set(CAPABILITIES)


def test_schema_states_characters_and_the_model_enforces_bytes() -> None:
    # 200 two-byte characters: within the schema's maxLength (characters), over the
    # model's byte bound. The schema is the weaker, client-side check by construction.
    raw = {"title": "é" * 200}
    assert _validator("create-task").is_valid(raw)
    with pytest.raises(ValidationError, match="is 400 bytes of UTF-8"):
        CreateTaskInput.model_validate(raw)
