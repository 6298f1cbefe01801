"""The fake GitHub's reading of request parameters and bodies as its endpoints take them:
choices, ``since``, a JSON object body, titles, texts, name lists, assignees and label
bodies, each refused the way GitHub refuses it."""

from __future__ import annotations

from typing import Any

from tests.support.fake_github_app import (
    ApiError,
    Ctx,
    validation_failed,
)
from tests.support.fake_github_model import JSON, parse_iso

_MAX_ASSIGNEES = 10


def parse_choice(ctx: Ctx, name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = ctx.query(name, default) or default
    if value not in allowed:
        raise validation_failed({"field": name, "code": "invalid", "value": value})
    return value


def parse_since(ctx: Ctx) -> float | None:
    value = ctx.query("since")
    if not value:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        raise validation_failed({"field": "since", "code": "invalid", "value": value}) from None


def json_object(ctx: Ctx) -> JSON:
    if ctx.body is None:
        return {}
    if not isinstance(ctx.body, dict):
        raise ApiError(400, "Problems parsing JSON")
    return ctx.body


def parse_title(value: Any) -> str:
    if not isinstance(value, str | int) or not str(value).strip():
        raise validation_failed({"field": "title", "code": "invalid", "value": value})
    return str(value)


def parse_text(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise validation_failed({"field": field, "code": "invalid", "value": value})
    return value


def parse_names(value: Any, field: str) -> list[str] | None:
    """Label names from strings or ``{"name": …}`` objects; ``None`` when absent."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise validation_failed({"field": field, "code": "invalid", "value": value})
    names: list[str] = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise validation_failed({"field": field, "code": "invalid", "value": item})
        if name not in names:
            names.append(name)
    return names


def parse_assignees(ctx: Ctx, body: JSON) -> list[str] | None:
    """``assignees`` (or the legacy ``assignee``) on create/PATCH: each must be assignable,
    else 422 as GitHub answers."""
    if "assignees" in body:
        logins = parse_names(body["assignees"], "assignees")
    elif "assignee" in body:
        logins = [] if body["assignee"] is None else parse_names([body["assignee"]], "assignee")
    else:
        return None
    logins = logins or []
    if len(logins) > _MAX_ASSIGNEES:
        raise validation_failed({"field": "assignees", "code": "invalid", "value": logins})
    assignable = ctx.repo().assignable
    for login in logins:
        if login not in assignable:
            raise validation_failed({"field": "assignees", "code": "invalid", "value": login})
    return logins


def login_list(ctx: Ctx) -> list[str]:
    body = json_object(ctx)
    if "assignees" not in body:
        raise validation_failed({"field": "assignees", "code": "missing_field"})
    logins = parse_names(body["assignees"], "assignees") or []
    if len(logins) > _MAX_ASSIGNEES:
        raise validation_failed({"field": "assignees", "code": "invalid", "value": logins})
    return logins


def label_body(ctx: Ctx) -> list[str]:
    """``{"labels": [...]}`` or a bare list, as GitHub accepts both."""
    body = ctx.body
    if isinstance(body, dict):
        body = body.get("labels")
    names = parse_names(body, "labels")
    if names is None:
        raise validation_failed({"field": "labels", "code": "missing_field"}, resource="Label")
    return names
