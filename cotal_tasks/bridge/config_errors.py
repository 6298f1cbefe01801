"""A refused config explained as the file spells it: each problem at its key, an unknown
key answered with the nearest valid one, and no echo of a list's length when one of its
items was the problem."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.identity import LIFECYCLE_UID, OWNER_OR_ACTOR, PRINCIPAL_PATTERN
from cotal_tasks.providers import registry


class ConfigRefused(ContractError):
    """A config file refused when it loads: ``problems``, one ``key: what. remedy`` each
    (the command line prints one line per problem)."""

    def __init__(self, path: Path, found: list[str]) -> None:
        listed = "; ".join(found)
        super().__init__(
            ErrorCode.BAD_REQUEST, f"config {path} is refused: {listed}. Fix those settings"
        )
        self.path = path
        self.problems = found


def problems(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One ``key: what. remedy`` per problem, keys as the file spells them."""
    errors = exc.errors(include_url=False, include_input=False)
    lines = []
    for err in errors:
        if err["type"] == "too_short" and _has_inner(err, errors):
            continue  # an item of the list was refused: its own error says which
        key = ".".join(file_path(err["loc"])) or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch":  # never pydantic's raw regex
            message = _pattern_words(err)
        if err["type"] == "extra_forbidden":
            near = nearest(root, err["loc"])
            message = f"{err['loc'][-1]!s} is not a setting here "
            message += f"(did you mean {near}?)" if near else "(remove it)"
        lines.append(f"{key}: {message}")
    return lines


# The pattern-checked settings, in words (a pattern not listed gets the plain sentence).
_PATTERNS = {
    OWNER_OR_ACTOR.pattern: "a Cotal owner or actor token ([A-Za-z0-9_], 1 to 64 characters)",
    LIFECYCLE_UID.pattern: "a lifecycle uid (26 to 32 characters of [a-z0-9])",
    PRINCIPAL_PATTERN: "a seat principal OWNER.ACTOR, such as local.builder",
}


def _pattern_words(err: ErrorDetails) -> str:
    ctx = err.get("ctx") or {}
    words = _PATTERNS.get(str(ctx.get("pattern")))
    if words is None:
        return "is not in the form this setting takes. See the setting in the docs"
    return f"is not {words}. Correct the value"


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
