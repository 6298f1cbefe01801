"""A refused config explained as the file spells it: each problem at its key, an unknown
key answered with the nearest valid one, and no echo of a list's length when one of its
items was the problem."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from cotal_tasks.providers import registry


def problems(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One ``key: what. remedy`` per problem, keys as the file spells them."""
    errors = exc.errors(include_url=False, include_input=False)
    lines = []
    for err in errors:
        if err["type"] == "too_short" and _has_inner(err, errors):
            continue  # an item of the list was refused: its own error says which
        key = ".".join(file_path(err["loc"])) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            near = nearest(root, err["loc"])
            message = f"{err['loc'][-1]!s} is not a setting here "
            message += f"(did you mean {near}?)" if near else "(remove it)"
        lines.append(f"{key}: {message}")
    return lines


def _has_inner(err: ErrorDetails, errors: Iterable[ErrorDetails]) -> bool:
    loc = err["loc"]
    return any(len(o["loc"]) > len(loc) and o["loc"][: len(loc)] == loc for o in errors)


def nearest(root: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The valid key nearest the unknown one at ``loc`` (its last part), if one is near."""
    model = _model_at(root, loc[:-1])
    if model is None:
        return None
    keys = [name for name in model.model_fields if name != "settings"]
    if model.__name__ == "EndpointConfig":
        keys += ["provider", *(p.section for p in registry.PROVIDERS if p.section)]
    found = difflib.get_close_matches(str(loc[-1]), keys, n=1, cutoff=0.5)
    return found[0] if found else None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list: the same model as the list's
        entry = registry.BY_NAME.get(part)
        if entry is not None and model.__name__ == "EndpointConfig":
            model = entry.settings  # settings.<provider>: the provider's own model
            continue
        if part == "settings":
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return None
        model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin in (tuple, list, Union, types.UnionType) or origin is not None:
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def file_path(loc: tuple[int | str, ...]) -> list[str]:
    """An error's location as the file spells it: ``settings.<provider>`` is the provider's
    section (``endpoints.0.settings.tower-do.board`` is ``endpoints.0.tower_do.board``)."""
    parts = [str(p) for p in loc]
    for i, part in enumerate(parts[:-1]):
        entry = registry.BY_NAME.get(parts[i + 1])
        if part == "settings" and entry is not None:
            return [*parts[:i], entry.section or entry.name, *parts[i + 2 :]]
    return parts
