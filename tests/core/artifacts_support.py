"""What the artifact tests share: the dialect, section 1's command table, and every schema
and closure the contract builds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator

from cotal_tasks.core import BOARD_CHANGED, Closure, contract_artifacts

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


def input_validator(command: str) -> Draft202012Validator:
    """A validator for ``command``'s input schema."""
    return Draft202012Validator(json.loads(contract_artifacts().inputs[command].root.data))
