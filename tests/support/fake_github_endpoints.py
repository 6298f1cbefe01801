"""The fake GitHub's REST endpoints, with the documented parameters, defaults and
validation. Each takes a ``Ctx`` and returns a ``Reply`` or raises ``ApiError``."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.fake_github_app import (
    ApiError,
    Ctx,
    Reply,
    not_found,
    validation_failed,
)
from tests.support.fake_github_model import STATE_REASONS, Issue
from tests.support.fake_github_params import (
    json_object,
    label_body,
    login_list,
    parse_assignees,
    parse_choice,
    parse_names,
    parse_since,
    parse_text,
    parse_title,
)
from tests.support.fake_tracker import Endpoint, endpoint

_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_ISSUE = _REPO + r"/issues/(?P<number>\d+)"


# -- reads ----------------------------------------------------------------------------


def rate_limit(ctx: Ctx) -> Reply:
    fake = ctx.fake
    core = {
        "limit": fake.rate_limit,
        "used": max(0, fake.rate_limit - fake.rate_remaining),
        "remaining": fake.rate_remaining,
        "reset": fake.rate_reset,
    }
    other = {"limit": 5000, "used": 0, "remaining": 5000, "reset": fake.rate_reset}
    resources = {"core": core, "graphql": other, "search": other | {"limit": 30}}
    return Reply(200, {"resources": resources, "rate": core})


def get_user(ctx: Ctx) -> Reply:
    return Reply(200, ctx.shapes.user(ctx.fake.login) | {"name": None, "email": None})


def get_repo(ctx: Ctx) -> Reply:
    # The token's permissions on the repository: read-only while writes are refused.
    writes = ctx.fake.refusal is None
    permissions = {"admin": False, "maintain": False, "push": writes, "triage": writes}
    return Reply(
        200, {**ctx.shapes.repository(ctx.repo()), "permissions": {**permissions, "pull": True}}
    )


def list_org_repos(ctx: Ctx) -> Reply:
    """``GET /orgs/{org}/repos``: the organization's repositories (``type`` all, the
    default), by name, paged by ``Link``, but ``fake.unlisted`` (as a listing paged while
    another repository was deleted skips one); 404 for an organization with none here."""
    org = ctx.params["org"].casefold()
    parse_choice(ctx, "type", "all", ("all", "public", "private", "forks", "sources", "member"))
    repos = sorted(
        (
            r
            for r in ctx.fake.repos.values()
            if r.owner.casefold() == org and r.full_name not in ctx.fake.unlisted
        ),
        key=lambda r: r.full_name.casefold(),
    )
    if not repos:
        raise not_found()
    return Reply(200, [ctx.shapes.repository(r) for r in ctx.page(repos)])


def list_installation_repos(ctx: Ctx) -> Reply:
    """``GET /installation/repositories``: ``{total_count, repository_selection,
    repositories}`` of what the installation was granted (``fake.installation``), paged
    by ``Link``; 403 without an installation (a token that is not an App's)."""
    granted = ctx.fake.installation
    if granted is None:
        raise ApiError(403, "This endpoint can only be accessed with an installation token")
    repos = [ctx.fake.repos[name] for name in sorted(granted, key=str.casefold)]
    page = ctx.page(repos)
    return Reply(
        200,
        {
            "total_count": len(repos),
            "repository_selection": "selected",
            "repositories": [ctx.shapes.repository(r) for r in page],
        },
    )


def list_issues(ctx: Ctx) -> Reply:
    """``state`` (default open), ``sort`` created|updated|comments, ``direction`` (default
    desc), ``since`` (updated at or after), ``labels`` (all of), ``assignee``, ``creator``.
    Pull requests are included."""
    repo = ctx.repo()
    state = parse_choice(ctx, "state", "open", ("open", "closed", "all"))
    sort = parse_choice(ctx, "sort", "created", ("created", "updated", "comments"))
    direction = parse_choice(ctx, "direction", "desc", ("asc", "desc"))
    items = [i for i in repo.issues.values() if i.visible]
    if state != "all":
        items = [i for i in items if i.state == state]
    since = parse_since(ctx)
    if since is not None:
        items = [i for i in items if since <= i.updated_at]
        if ctx.fake.since_lag > 0:
            horizon = ctx.fake.clock.seconds - ctx.fake.since_lag
            items = [i for i in items if i.updated_at <= horizon]
    labels = ctx.query("labels")
    if labels:
        wanted = {name.strip() for name in labels.split(",") if name.strip()}
        items = [i for i in items if wanted <= set(i.labels)]
    assignee = ctx.query("assignee")
    if assignee == "none":
        items = [i for i in items if not i.assignees]
    elif assignee == "*":
        items = [i for i in items if i.assignees]
    elif assignee:
        items = [i for i in items if assignee in i.assignees]
    creator = ctx.query("creator")
    if creator:
        items = [i for i in items if i.user == creator]
    items = _by_milestone_and_type(ctx, items)
    key: Callable[[Issue], tuple[int, int]] = {
        "created": lambda i: (i.created_at, i.number),
        "updated": lambda i: (i.updated_at, i.number),
        "comments": lambda i: (len(i.comments), i.number),
    }[sort]
    items.sort(key=key, reverse=direction == "desc")
    shapes = ctx.shapes
    return Reply(200, [shapes.issue(i) for i in ctx.page(items)])


def _by_milestone_and_type(ctx: Ctx, items: list[Issue]) -> list[Issue]:
    """``milestone``: a number, ``*`` (any) or ``none``; ``type``: a name, ``*`` or
    ``none`` (GitHub's issue listing filters)."""
    milestone = ctx.query("milestone")
    if milestone == "none":
        items = [i for i in items if i.milestone is None]
    elif milestone == "*":
        items = [i for i in items if i.milestone is not None]
    elif milestone:
        if not milestone.isdigit():
            raise validation_failed({"field": "milestone", "code": "invalid", "value": milestone})
        items = [i for i in items if i.milestone == int(milestone)]
    kind = ctx.query("type")
    if kind == "none":
        items = [i for i in items if i.issue_type is None]
    elif kind == "*":
        items = [i for i in items if i.issue_type is not None]
    elif kind:
        items = [i for i in items if (i.issue_type or "").lower() == kind.lower()]
    return items


def list_milestones(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    shapes = ctx.shapes
    return Reply(200, [shapes.milestone(repo, n) for n in ctx.page(sorted(repo.milestones))])


def get_issue(ctx: Ctx) -> Reply:
    return Reply(200, ctx.shapes.issue(ctx.issue(), single=True))


def timeline(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    events = sorted(issue.timeline, key=lambda e: e.created_at)
    shapes = ctx.shapes
    return Reply(200, [shapes.event(issue, e) for e in ctx.page(events)])


# What GitHub's issue events API carries; the other timeline items (cross-references,
# comments, Development links, commits on a pull request) are timeline-only.
TIMELINE_ONLY = frozenset({"cross-referenced", "commented", "connected", "committed"})


def list_issue_events(ctx: Ctx) -> Reply:
    """``GET /repos/{owner}/{repo}/issues/events``: every issue event of the repository's
    issues and pull requests, newest first, each with its ``issue``."""
    repo = ctx.repo()
    shapes = ctx.shapes
    found = [
        (event, issue)
        for issue in repo.issues.values()
        if issue.visible
        for event in issue.timeline
        if event.kind not in TIMELINE_ONLY and event.id is not None
    ]
    found.sort(key=lambda pair: pair[0].id or 0, reverse=True)
    return Reply(
        200,
        [
            shapes.event(issue, event) | {"issue": shapes.issue(issue)}
            for event, issue in ctx.page(found)
        ],
    )


def list_comments(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    since = parse_since(ctx)
    comments = [c for c in issue.comments if since is None or c.updated_at >= since]
    shapes = ctx.shapes
    return Reply(200, [shapes.comment(issue, c) for c in ctx.page(comments)])


def list_labels(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    repo, shapes = ctx.repo(), ctx.shapes
    return Reply(200, [shapes.label(repo, name) for name in ctx.page(list(issue.labels))])


def check_assignee(ctx: Ctx) -> Reply:
    if ctx.params["login"] in ctx.repo().assignable:
        return Reply(204)
    raise not_found()


def list_pulls(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    state = parse_choice(ctx, "state", "open", ("open", "closed", "all"))
    sort = parse_choice(
        ctx, "sort", "created", ("created", "updated", "popularity", "long-running")
    )
    default_direction = "desc" if sort == "created" else "asc"
    direction = parse_choice(ctx, "direction", default_direction, ("asc", "desc"))
    pulls = [i for i in repo.issues.values() if i.pull is not None and i.visible]
    if state != "all":
        pulls = [i for i in pulls if i.state == state]
    head, base = ctx.query("head"), ctx.query("base")
    if head:
        pulls = [i for i in pulls if i.pull and f"{repo.owner}:{i.pull.head_ref}" == head]
    if base:
        pulls = [i for i in pulls if i.pull and i.pull.base_ref == base]
    by_updated = sort == "updated"
    pulls.sort(
        key=lambda i: (i.updated_at if by_updated else i.created_at, i.number),
        reverse=direction == "desc",
    )
    shapes = ctx.shapes
    return Reply(200, [shapes.pull(i, full=False) for i in ctx.page(pulls)])


def get_pull(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    if issue.pull is None:
        raise not_found()
    return Reply(200, ctx.shapes.pull(issue))


def graphql(ctx: Ctx) -> Reply:
    """``POST /graphql``: ``{"query": …, "variables": …}``; errors come back with 200."""
    from tests.support.fake_github_graphql import execute

    if ctx.fake.graphql_answers:  # scripted: a transient error, a rate limit
        return Reply(200, ctx.fake.graphql_answers.popleft())
    body = json_object(ctx)
    query = body.get("query")
    if not isinstance(query, str):
        raise ApiError(400, "A query attribute must be specified and must be a string.")
    variables = body.get("variables")
    return Reply(200, execute(ctx.fake, query, variables if isinstance(variables, dict) else None))


# -- writes (each bumps updated_at) ----------------------------------------------------


def create_issue(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    body = json_object(ctx)
    if "title" not in body or body["title"] is None:
        raise validation_failed({"field": "title", "code": "missing_field"})
    title = parse_title(body["title"])
    text = parse_text(body.get("body"), "body")
    labels = parse_names(body.get("labels"), "labels") or []
    assignees = parse_assignees(ctx, body) or []
    milestone = body.get("milestone")
    if milestone is not None and milestone not in repo.milestones:
        raise validation_failed({"field": "milestone", "code": "invalid", "value": milestone})
    kind = parse_text(body.get("type"), "type")
    issue = ctx.fake.create_issue(repo.full_name, title, text, labels, assignees, ctx.fake.login)
    issue.milestone, issue.issue_type = milestone, kind
    out = ctx.shapes.issue(issue, single=True)
    return Reply(201, out, {"location": out["url"]})


def update_issue(ctx: Ctx) -> Reply:
    """PATCH: ``state_reason`` only counts when ``state`` changes (closing defaults it to
    ``completed``, reopening sets ``reopened``); ``labels``/``assignees`` replace."""
    fake, issue, body = ctx.fake, ctx.issue(), json_object(ctx)
    title = parse_title(body["title"]) if "title" in body else None
    text = parse_text(body.get("body"), "body")
    state = body.get("state")
    if state is not None and state not in ("open", "closed"):
        raise validation_failed({"field": "state", "code": "invalid", "value": state})
    reason = body.get("state_reason")
    if reason is not None and reason not in STATE_REASONS:
        raise validation_failed({"field": "state_reason", "code": "invalid", "value": reason})
    if state == "closed" and issue.state == "open" and reason == "reopened":
        raise validation_failed({"field": "state_reason", "code": "invalid", "value": reason})
    labels = parse_names(body.get("labels"), "labels")
    assignees = parse_assignees(ctx, body)
    actor = fake.login
    if title is not None:
        fake.set_title(issue, title, actor)
    if "body" in body:
        issue.body = text
    if labels is not None:
        for name in [n for n in issue.labels if n not in labels]:
            fake.remove_label(issue, name, actor)
        fake.add_labels(issue, labels, actor)
    if assignees is not None:
        fake.remove_assignees(issue, [a for a in issue.assignees if a not in assignees], actor)
        fake.add_assignees(issue, assignees, actor)
    if state is not None:
        fake.set_state(issue, state, reason, actor)
    issue.updated_at = fake.clock.seconds
    return Reply(200, ctx.shapes.issue(issue, single=True))


def create_comment(ctx: Ctx) -> Reply:
    issue, body = ctx.issue(), json_object(ctx)
    text = body.get("body")
    if not isinstance(text, str) or not text.strip():
        code = "missing_field" if text is None else "invalid"
        raise validation_failed({"field": "body", "code": code}, resource="IssueComment")
    comment = ctx.fake.comment(issue, ctx.fake.login, text)
    out = ctx.shapes.comment(issue, comment)
    return Reply(201, out, {"location": out["url"]})


def add_assignees(ctx: Ctx) -> Reply:
    """Adds up to 10; logins that cannot be assigned are silently dropped (as GitHub
    does; ``GET /assignees/{login}`` is how to check). 201 with the issue."""
    issue, logins = ctx.issue(), login_list(ctx)
    assignable = ctx.repo().assignable
    ctx.fake.add_assignees(issue, [a for a in logins if a in assignable], ctx.fake.login)
    return Reply(201, ctx.shapes.issue(issue, single=True))


def remove_assignees(ctx: Ctx) -> Reply:
    issue, logins = ctx.issue(), login_list(ctx)
    ctx.fake.remove_assignees(issue, logins, ctx.fake.login)
    return Reply(200, ctx.shapes.issue(issue, single=True))


def add_labels(ctx: Ctx) -> Reply:
    issue, names = ctx.issue(), label_body(ctx)
    ctx.fake.add_labels(issue, names, ctx.fake.login)
    repo, shapes = ctx.repo(), ctx.shapes
    return Reply(200, [shapes.label(repo, n) for n in issue.labels])


def set_labels(ctx: Ctx) -> Reply:
    issue, names = ctx.issue(), label_body(ctx)
    for name in [n for n in issue.labels if n not in names]:
        ctx.fake.remove_label(issue, name, ctx.fake.login)
    ctx.fake.add_labels(issue, names, ctx.fake.login)
    repo, shapes = ctx.repo(), ctx.shapes
    return Reply(200, [shapes.label(repo, n) for n in issue.labels])


def remove_label(ctx: Ctx) -> Reply:
    issue, name = ctx.issue(), ctx.params["name"]
    if name not in issue.labels:
        raise ApiError(404, "Label does not exist")
    ctx.fake.remove_label(issue, name, ctx.fake.login)
    repo, shapes = ctx.repo(), ctx.shapes
    return Reply(200, [shapes.label(repo, n) for n in issue.labels])


def remove_all_labels(ctx: Ctx) -> Reply:
    issue = ctx.issue()
    for name in list(issue.labels):
        ctx.fake.remove_label(issue, name, ctx.fake.login)
    issue.updated_at = ctx.fake.clock.seconds
    return Reply(204)


ENDPOINTS: list[Endpoint[Ctx, Reply]] = [
    endpoint("GET", r"/rate_limit", rate_limit, free=True),
    endpoint("GET", r"/user", get_user),
    endpoint("POST", r"/graphql", graphql),
    endpoint("POST", r"/api/graphql", graphql),  # GitHub Enterprise Server's path
    endpoint("GET", r"/orgs/(?P<org>[^/]+)/repos", list_org_repos),
    endpoint("GET", r"/installation/repositories", list_installation_repos),
    endpoint("GET", _REPO, get_repo),
    endpoint("GET", _REPO + r"/issues", list_issues),
    endpoint("POST", _REPO + r"/issues", create_issue),
    endpoint("GET", _REPO + r"/issues/events", list_issue_events),
    endpoint("GET", _ISSUE, get_issue),
    endpoint("PATCH", _ISSUE, update_issue),
    endpoint("GET", _ISSUE + r"/timeline", timeline),
    endpoint("GET", _ISSUE + r"/comments", list_comments),
    endpoint("POST", _ISSUE + r"/comments", create_comment),
    endpoint("POST", _ISSUE + r"/assignees", add_assignees),
    endpoint("DELETE", _ISSUE + r"/assignees", remove_assignees),
    endpoint("GET", _ISSUE + r"/labels", list_labels),
    endpoint("POST", _ISSUE + r"/labels", add_labels),
    endpoint("PUT", _ISSUE + r"/labels", set_labels),
    endpoint("DELETE", _ISSUE + r"/labels", remove_all_labels),
    endpoint("DELETE", _ISSUE + r"/labels/(?P<name>.+)", remove_label),
    endpoint("GET", _REPO + r"/assignees/(?P<login>[^/]+)", check_assignee),
    endpoint("GET", _REPO + r"/pulls", list_pulls),
    endpoint("GET", _REPO + r"/milestones", list_milestones),
    endpoint("GET", _REPO + r"/pulls/(?P<number>\d+)", get_pull),
]
