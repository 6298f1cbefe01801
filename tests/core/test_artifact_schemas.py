"""Every schema: JSON Schema 2020-12 validity, closed objects, no ``format``, only local
references, safe patterns, and null only where a command gives it a meaning."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.core.artifacts_support import DIALECT, SCHEMA_IDS, SCHEMAS

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
