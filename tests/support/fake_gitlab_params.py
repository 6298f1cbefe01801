"""The fake GitLab's reading of request parameters as its endpoints take them: choices,
times, label and people filters, titles, strings, label lists and assignees, each refused
the way GitLab refuses it."""

from __future__ import annotations

from typing import Any

from tests.support.clock import parse_iso
from tests.support.fake_gitlab_context import Ctx, invalid_record, param_error
from tests.support.fake_gitlab_model import Issue

_TITLE_MAX = 255


def issue_json(
    ctx: Ctx, issue: Issue, *, single: bool = False, labels_details: bool = False
) -> dict[str, Any]:
    count = len(ctx.fake.related_mrs(issue))
    return ctx.shapes.issue(issue, single=single, labels_details=labels_details, mr_count=count)


def parse_choice(ctx: Ctx, name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = ctx.query(name) or default
    if value not in allowed:
        raise param_error(f"{name} does not have a valid value")
    return value


def parse_time(ctx: Ctx, name: str) -> int | None:
    value = ctx.query(name)
    if not value:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        raise param_error(f"{name} is invalid") from None


def filter_labels(ctx: Ctx, items: list[Issue]) -> list[Issue]:
    """``labels`` (all of; ``None``/``Any``), ``not[labels]`` (none of), ``milestone``
    (a title; ``None``/``Any``) and ``issue_type``."""
    excluded = {n.strip() for n in (ctx.query("not[labels]") or "").split(",") if n.strip()}
    if excluded:
        items = [i for i in items if not excluded & set(i.labels)]
    milestone = ctx.query("milestone")
    if milestone:
        projects = ctx.fake.projects
        if milestone.lower() in ("none", "any"):
            items = [i for i in items if (i.milestone_id is None) == (milestone.lower() == "none")]
        else:
            items = [
                i
                for i in items
                if projects[i.project_id].milestones.get(i.milestone_id or 0) == milestone
            ]
    issue_type = ctx.query("issue_type")
    if issue_type:
        items = [i for i in items if i.issue_type == issue_type]
    labels = ctx.query("labels")
    if not labels:
        return items
    if labels.lower() == "none":
        return [i for i in items if not i.labels]
    if labels.lower() == "any":
        return [i for i in items if i.labels]
    wanted = {n.strip() for n in labels.split(",") if n.strip()}
    return [i for i in items if wanted <= set(i.labels)]


def filter_people(ctx: Ctx, items: list[Issue]) -> list[Issue]:
    assignee_id = ctx.query("assignee_id")
    if assignee_id:
        if assignee_id.lower() == "none":
            items = [i for i in items if not i.assignees]
        elif assignee_id.lower() == "any":
            items = [i for i in items if i.assignees]
        else:
            user = ctx.fake.user_by_id(int(assignee_id)) if assignee_id.isdigit() else None
            items = [i for i in items if user is not None and user.username in i.assignees]
    names = ctx.request.query_params.getlist(
        "assignee_username"
    ) or ctx.request.query_params.getlist("assignee_username[]")
    for name in names:
        items = [i for i in items if name in i.assignees]
    author = ctx.query("author_username")
    if author:
        items = [i for i in items if i.author == author]
    author_id = ctx.query("author_id")
    if author_id and author_id.isdigit():
        user = ctx.fake.user_by_id(int(author_id))
        items = [i for i in items if user is not None and i.author == user.username]
    return items


def parse_title(value: Any) -> str:
    if not isinstance(value, str | int) or not str(value).strip():
        raise invalid_record("title", "can't be blank")
    if len(str(value)) > _TITLE_MAX:
        raise invalid_record("title", f"is too long (maximum is {_TITLE_MAX} characters)")
    return str(value)


def parse_string(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise param_error(f"{name} is invalid")
    return value


def parse_labels(value: Any, name: str) -> list[str] | None:
    """A comma-separated string (as documented) or an array; ``None`` when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = [p for v in value for p in v.split(",")]
    else:
        raise param_error(f"{name} is invalid")
    return list(dict.fromkeys(p.strip() for p in parts if p.strip()))


def parse_assignees(ctx: Ctx) -> list[str] | None:
    """``assignee_ids`` (array, or comma-separated) or the deprecated ``assignee_id``.
    ``0`` or an empty list unassigns; ids of unknown users are dropped silently."""
    raw = ctx.arg("assignee_ids")
    if raw is None:
        single = ctx.arg("assignee_id")
        if single is None:
            return None
        raw = [single]
    if isinstance(raw, str):
        raw = [p for p in raw.split(",") if p.strip()]
    if isinstance(raw, int) or not isinstance(raw, list):
        raw = [raw]
    ids: list[int] = []
    for value in raw:
        try:
            ids.append(int(value))
        except (TypeError, ValueError):
            raise param_error("assignee_ids is invalid") from None
    users = [ctx.fake.user_by_id(i) for i in ids if i != 0]
    if ctx.fake.single_assignee:
        users = users[:1]  # IssuableBaseService: assignee_ids.first(1) without the licence
    return [u.username for u in users if u is not None]
