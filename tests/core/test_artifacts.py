"""The cluster document and its artifacts: canonical bytes, digests, manifests, and the
command table of section 1, as a document and as data. The schemas are checked in
``test_artifact_schemas.py``; examples and outputs in ``test_artifact_examples.py``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from cotal_tasks.core import (
    BOARD_CHANGED_TOPIC,
    CAPABILITIES,
    CLUSTER_REVISION,
    CLUSTER_URN,
    COMMANDS,
    BoardChanged,
    Closure,
    CreateTaskInput,
    canonical_json,
    contract_artifacts,
    digest,
    json_schema,
)
from cotal_tasks.core.artifacts import cluster_document, manifest_for
from tests.core.artifacts_support import CLOSURE_IDS, CLOSURES, CONTRACT_TABLE, input_validator

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
    assert input_validator("create-task").is_valid(raw)
    with pytest.raises(ValidationError, match="is 400 bytes of UTF-8"):
        CreateTaskInput.model_validate(raw)
