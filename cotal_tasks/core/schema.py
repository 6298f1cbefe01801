"""JSON Schemas (2020-12) of the contract shapes, generated from the models.

The generated schemas are closed objects with no ``format`` and only safe patterns
(one character class, one quantifier). Pydantic's ``anyOf [X, null]`` for an optional
field is collapsed to ``X``: absent is how the contract says "not set", and ``null`` is
admitted only where a command gives it a meaning. Titles, descriptions and defaults
are dropped so the bytes, and therefore the digests, depend on the shape alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from cotal_tasks.core.messages import Input

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_DROPPED = frozenset({"title", "description", "default"})
_SUBSCHEMA_MAPS = frozenset({"properties", "$defs", "patternProperties"})


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema == {"type": "null"}


def _clean(node: Any, keep_null: frozenset[str], prop: str | None = None) -> Any:
    if isinstance(node, list):
        return [_clean(item, keep_null) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _clean(sub, keep_null, name) for name, sub in value.items()}
        else:
            out[key] = _clean(value, keep_null)
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and prop not in keep_null:
        rest = [branch for branch in any_of if not _is_null(branch)]
        if len(rest) == 1:
            del out["anyOf"]
            out.update(rest[0])
    return out


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The contract JSON Schema of ``model``."""
    keep_null = model.nullable if issubclass(model, Input) else frozenset()
    raw = model.model_json_schema(mode="validation")
    schema = _clean(raw, keep_null)
    return {"$schema": DIALECT, **schema}
