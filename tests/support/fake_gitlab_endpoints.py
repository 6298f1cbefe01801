"""The fake GitLab's REST endpoints (paths relative to ``/api/v4``), with the documented
parameters, defaults and validation. Each takes a ``Ctx`` and returns a ``Reply`` or
raises ``ApiError``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.fake_gitlab_context import (
    Ctx,
    Keyset,
    Reply,
    invalid_record,
    param_error,
)
from tests.support.fake_gitlab_model import MergeRequest
from tests.support.fake_gitlab_params import (
    filter_labels,
    filter_people,
    issue_json,
    parse_assignees,
    parse_choice,
    parse_labels,
    parse_string,
    parse_time,
    parse_title,
)
from tests.support.fake_tracker import Endpoint, endpoint

_PROJECT = r"/projects/(?P<id>[^/]+)"
_GROUP = r"/groups/(?P<id>[^/]+)"
_ISSUE = _PROJECT + r"/issues/(?P<iid>\d+)"
_MR = _PROJECT + r"/merge_requests/(?P<iid>\d+)"

ISSUE_ORDERS = (
    "created_at",
    "updated_at",
    "title",
    "id",
    "priority",
    "due_date",
    "relative_position",
    "label_priority",
    "milestone_due",
    "popularity",
    "weight",
)
_ISSUE_KEYS: dict[str, Callable[[Any], Any]] = {
    "created_at": lambda i: i.created_ms,
    "updated_at": lambda i: i.updated_ms,
    "title": lambda i: i.title,
    "id": lambda i: i.id,
}
# Project issues answer keyset pagination since GitLab 18.3 (gitlab!199887); orders this
# fake does not model (weight, due_date, relative_position…) fall back to offset.
ISSUE_KEYSET = Keyset("Issue", _ISSUE_KEYS)
_UPDATE_FIELDS = (
    "assignee_id",
    "assignee_ids",
    "confidential",
    "created_at",
    "description",
    "discussion_locked",
    "due_date",
    "labels",
    "add_labels",
    "remove_labels",
    "milestone_id",
    "state_event",
    "title",
    "issue_type",
    "weight",
    "epic_id",
    "epic_iid",
)


# -- users and projects ------------------------------------------------------------------


def get_current_user(ctx: Ctx) -> Reply:
    name = ctx.fake.username
    return Reply(200, ctx.shapes.user_full(name) | {"email": f"{name}@example.com"})


def list_users(ctx: Ctx) -> Reply:
    """``username`` is an exact, case-insensitive match; ``search`` a substring."""
    users = sorted(ctx.fake.users.values(), key=lambda u: u.id)
    username = ctx.query("username")
    if username is not None:
        users = [u for u in users if u.username.lower() == username.lower()]
    search = (ctx.query("search") or "").lower()
    if search:
        users = [u for u in users if search in u.username.lower() or search in u.name.lower()]
    shapes = ctx.shapes
    return Reply(200, [shapes.user_full(u.username) for u in ctx.paginate(users)])


def get_project(ctx: Ctx) -> Reply:
    # The token's access: Developer (30), or Reporter (20) while writes are refused.
    level = 30 if ctx.fake.refusal is None else 20
    access = {"project_access": {"access_level": level, "notification_level": 3}}
    return Reply(
        200, {**ctx.shapes.project(ctx.project()), "permissions": {**access, "group_access": None}}
    )


# -- issues ------------------------------------------------------------------------------


def list_issues(ctx: Ctx) -> Reply:
    """``state`` (default all), ``order_by`` (default created_at), ``sort`` (default desc),
    ``updated_after``/``updated_before``/``created_after``/``created_before`` (inclusive),
    ``labels`` (all of; ``None``/``Any``), ``assignee_id``, ``assignee_username``,
    ``author_username``, ``iids[]``, ``search``; offset or keyset pagination."""
    return _issue_listing(ctx, list(ctx.project().issues.values()), ISSUE_KEYSET)


def get_group(ctx: Ctx) -> Reply:
    group = ctx.group()
    return Reply(200, ctx.shapes.group(group, ctx.fake.groups[group]))


def list_group_issues(ctx: Ctx) -> Reply:
    """``GET /groups/:id/issues``: the issues of every project of the group and of its
    subgroups (always), archived projects' left out unless ``non_archived=false``; the
    project listing's parameters, ``scope`` (``all``; the default, since the token is
    not the author), and offset pages only (GitLab offers keyset pages for project
    issues alone)."""
    parse_choice(ctx, "scope", "all", ("all", "created_by_me", "assigned_to_me"))
    projects = ctx.fake.group_projects(ctx.group(), archived=ctx.query("non_archived") == "false")
    return _issue_listing(ctx, [i for p in projects for i in p.issues.values()], None)


def list_group_merge_requests(ctx: Ctx) -> Reply:
    """``GET /groups/:id/merge_requests``: every project's of the group and subgroups."""
    projects = ctx.fake.group_projects(ctx.group(), archived=ctx.query("non_archived") == "false")
    return _merge_request_listing(ctx, [m for p in projects for m in p.merge_requests.values()])


def _issue_listing(ctx: Ctx, items: list[Any], keyset: Keyset | None) -> Reply:
    state = parse_choice(ctx, "state", "all", ("opened", "closed", "all"))
    order = parse_choice(ctx, "order_by", "created_at", ISSUE_ORDERS)
    descending = parse_choice(ctx, "sort", "desc", ("asc", "desc")) == "desc"
    if state != "all":
        items = [i for i in items if i.state == state]
    for name, attr, inclusive_after in (
        ("updated_after", "updated_ms", True),
        ("updated_before", "updated_ms", False),
        ("created_after", "created_ms", True),
        ("created_before", "created_ms", False),
    ):
        bound = parse_time(ctx, name)
        if bound is not None:
            if inclusive_after:
                items = [i for i in items if getattr(i, attr) >= bound]
            else:
                items = [i for i in items if getattr(i, attr) <= bound]
    items = filter_labels(ctx, items)
    items = filter_people(ctx, items)
    iids = ctx.request.query_params.getlist("iids[]")
    if iids:
        wanted = {int(v) for v in iids if v.isdigit()}
        items = [i for i in items if i.iid in wanted]
    search = (ctx.query("search") or "").lower()
    if search:
        items = [
            i for i in items if search in i.title.lower() or search in (i.description or "").lower()
        ]
    confidential = ctx.query("confidential")
    if confidential in ("true", "false"):
        items = [i for i in items if i.confidential == (confidential == "true")]
    key = _ISSUE_KEYS.get(order, _ISSUE_KEYS["created_at"])
    items.sort(key=lambda i: (key(i), i.id), reverse=descending)
    details = ctx.query("with_labels_details") == "true"
    page = ctx.paginate(items, keyset)
    return Reply(200, [issue_json(ctx, i, labels_details=details) for i in page])


def get_issue(ctx: Ctx) -> Reply:
    details = ctx.query("with_labels_details") == "true"
    return Reply(200, issue_json(ctx, ctx.issue(), single=True, labels_details=details))


def create_issue(ctx: Ctx) -> Reply:
    project, fake = ctx.project(), ctx.fake
    title = ctx.arg("title")
    if title is None:
        raise param_error("title is missing")
    title = parse_title(title)
    description = parse_string(ctx.arg("description"), "description")
    labels = parse_labels(ctx.arg("labels"), "labels") or []
    assignees = parse_assignees(ctx) or []
    milestone = ctx.arg("milestone_id")
    if milestone is not None and int(milestone) not in project.milestones:
        raise param_error("milestone_id is invalid")
    issue_type = ctx.arg("issue_type") or "issue"
    if issue_type not in ("issue", "incident", "test_case", "task"):
        raise param_error("issue_type does not have a valid value")
    issue = fake.create_issue(project, title, description, labels, assignees, fake.username)
    if ctx.arg("confidential") in (True, "true"):
        issue.confidential = True
    issue.milestone_id = None if milestone is None else int(milestone)
    issue.issue_type = issue_type
    return Reply(201, issue_json(ctx, issue, single=True))


def list_milestones(ctx: Ctx) -> Reply:
    """A project's milestones (``title``: that one only; every one is active here)."""
    project = ctx.project()
    title = ctx.query("title")
    found = [
        ctx.shapes.milestone(project, m)
        for m in sorted(project.milestones)
        if title is None or project.milestones[m] == title
    ]
    return Reply(200, ctx.paginate(found))


def update_issue(ctx: Ctx) -> Reply:
    """PUT: ``labels`` replace, then ``add_labels``/``remove_labels`` apply; a
    ``state_event`` that changes nothing (closing a closed issue) is a no-op, and a PUT
    that changes nothing leaves ``updated_at`` alone."""
    fake, issue = ctx.fake, ctx.issue()
    if not any(ctx.arg(name) is not None for name in _UPDATE_FIELDS):
        raise param_error(
            ", ".join(_UPDATE_FIELDS) + " are missing, at least one parameter must be provided"
        )
    state_event = ctx.arg("state_event")
    if state_event is not None and state_event not in ("close", "reopen"):
        raise param_error("state_event does not have a valid value")
    title = ctx.arg("title")
    title = parse_title(title) if title is not None else None
    description = parse_string(ctx.arg("description"), "description")
    labels = parse_labels(ctx.arg("labels"), "labels")
    add = parse_labels(ctx.arg("add_labels"), "add_labels") or []
    remove = set(parse_labels(ctx.arg("remove_labels"), "remove_labels") or [])
    assignees = parse_assignees(ctx)
    now = fake.clock.ms
    if title is not None and title != issue.title:
        issue.title, issue.updated_ms = title, now
    if description is not None and description != issue.description:
        issue.description, issue.updated_ms = description, now
    if labels is not None or add or remove:
        base = issue.labels if labels is None else labels
        fake.set_labels(issue, [n for n in [*base, *add] if n not in remove])
    if assignees is not None:
        fake.set_assignees(issue, assignees, by=fake.username)
    confidential = ctx.arg("confidential")
    if confidential is not None:
        flag = confidential in (True, "true")
        if flag != issue.confidential:
            issue.confidential, issue.updated_ms = flag, now
    if state_event is not None:
        fake.set_state(issue, "closed" if state_event == "close" else "opened", fake.username)
    return Reply(200, issue_json(ctx, issue, single=True))


def list_notes(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    order = parse_choice(ctx, "order_by", "created_at", ("created_at", "updated_at"))
    descending = parse_choice(ctx, "sort", "desc", ("asc", "desc")) == "desc"
    notes = sorted(
        issue.notes,
        key=lambda n: (n.created_ms if order == "created_at" else n.updated_ms, n.id),
        reverse=descending,
    )
    shapes = ctx.shapes
    return Reply(200, [shapes.note(issue, n) for n in ctx.paginate(notes)])


def create_note(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    body = ctx.arg("body")
    if body is None:
        raise param_error("body is missing")
    if not isinstance(body, str) or not body.strip():
        raise invalid_record("note", "can't be blank")
    note = ctx.fake.note(issue, ctx.fake.username, body)
    return Reply(201, ctx.shapes.note(issue, note))


def related_merge_requests(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    mrs = ctx.fake.related_mrs(issue)
    shapes = ctx.shapes
    return Reply(200, [shapes.merge_request(m) for m in ctx.paginate(mrs)])


def closed_by(ctx: Ctx) -> Reply:
    """MRs that close the issue when merged (recorded links, any MR state)."""
    issue = ctx.issue()
    mrs = ctx.fake.closing_mrs(issue)
    shapes = ctx.shapes
    return Reply(200, [shapes.merge_request(m) for m in ctx.paginate(mrs)])


# -- merge requests ----------------------------------------------------------------------


def list_merge_requests(ctx: Ctx) -> Reply:
    """``state`` (opened|closed|locked|merged|all, default all), ``order_by``
    (created_at|updated_at|title), ``sort``, ``updated_after``/``updated_before``,
    ``source_branch``; offset pagination only (``pagination=keyset`` is ignored)."""
    return _merge_request_listing(ctx, list(ctx.project().merge_requests.values()))


def _merge_request_listing(ctx: Ctx, mrs: list[MergeRequest]) -> Reply:
    state = parse_choice(ctx, "state", "all", ("opened", "closed", "locked", "merged", "all"))
    order = parse_choice(ctx, "order_by", "created_at", ("created_at", "updated_at", "title"))
    descending = parse_choice(ctx, "sort", "desc", ("asc", "desc")) == "desc"
    if state != "all":
        mrs = [m for m in mrs if m.state == state]
    after, before = parse_time(ctx, "updated_after"), parse_time(ctx, "updated_before")
    if after is not None:
        mrs = [m for m in mrs if m.updated_ms >= after]
    if before is not None:
        mrs = [m for m in mrs if m.updated_ms <= before]
    branch = ctx.query("source_branch")
    if branch:
        mrs = [m for m in mrs if m.source_branch == branch]

    def key(m: MergeRequest) -> tuple[Any, int]:
        value: Any = {"created_at": m.created_ms, "updated_at": m.updated_ms}.get(order, m.title)
        return (value, m.id)

    mrs.sort(key=key, reverse=descending)
    shapes = ctx.shapes
    return Reply(200, [shapes.merge_request(m) for m in ctx.paginate(mrs)])


def get_merge_request(ctx: Ctx) -> Reply:
    return Reply(200, ctx.shapes.merge_request(ctx.merge_request(), full=True))


def closes_issues(ctx: Ctx) -> Reply:
    mr, project = ctx.merge_request(), ctx.project()
    issues = [project.issues[i] for i in mr.closes if i in project.issues]
    return Reply(200, [issue_json(ctx, i) for i in ctx.paginate(issues)])


ENDPOINTS: list[Endpoint[Ctx, Reply]] = [
    endpoint("GET", r"/user", get_current_user),
    endpoint("GET", r"/users", list_users),
    endpoint("GET", _PROJECT, get_project),
    endpoint("GET", _PROJECT + r"/issues", list_issues),
    endpoint("GET", _GROUP, get_group),
    endpoint("GET", _GROUP + r"/issues", list_group_issues),
    endpoint("GET", _GROUP + r"/merge_requests", list_group_merge_requests),
    endpoint("POST", _PROJECT + r"/issues", create_issue),
    endpoint("GET", _ISSUE, get_issue),
    endpoint("PUT", _ISSUE, update_issue),
    endpoint("GET", _ISSUE + r"/notes", list_notes),
    endpoint("POST", _ISSUE + r"/notes", create_note),
    endpoint("GET", _ISSUE + r"/related_merge_requests", related_merge_requests),
    endpoint("GET", _ISSUE + r"/closed_by", closed_by),
    endpoint("GET", _PROJECT + r"/merge_requests", list_merge_requests),
    endpoint("GET", _PROJECT + r"/milestones", list_milestones),
    endpoint("GET", _MR, get_merge_request),
    endpoint("GET", _MR + r"/closes_issues", closes_issues),
]
