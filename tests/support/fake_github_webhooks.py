"""Webhook deliveries as GitHub sends them: HMAC-SHA256 signing and payload builders in
the documented shapes (octokit/webhooks ``payload-schemas``). Build payloads from a
``FakeGitHub`` so the webhook and the REST API tell the same story::

    payload = issues_payload(fake, "opened", "octo-org/hello-world", 1)
    body, headers = signed_webhook(SECRET, "issues", payload)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tests.support.fake_github_model import JSON, iso, node_id

if TYPE_CHECKING:
    from tests.support.fake_github_state import FakeGitHub

# GitHub's published test vector ("Validating webhook deliveries").
TEST_VECTOR_SECRET = "It's a Secret to Everybody"
TEST_VECTOR_PAYLOAD = b"Hello, World!"
TEST_VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

ISSUES_ACTIONS = frozenset(
    {"opened", "edited", "closed", "reopened", "labeled", "unlabeled", "assigned", "unassigned"}
)


def sign(secret: str | bytes, body: bytes) -> str:
    """``X-Hub-Signature-256``: ``sha256=`` + hex HMAC-SHA256 of the raw body."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def signed_webhook(
    secret: str | bytes,
    event: str,
    payload: Mapping[str, Any] | bytes,
    *,
    delivery: str | None = None,
    hook_id: int = 123_456_789,
) -> tuple[bytes, dict[str, str]]:
    """The raw body and headers of one delivery. ``payload`` bytes are sent as they are;
    a mapping is serialized to JSON. ``delivery`` defaults to a fresh UUID (pass the same
    one again to model a redelivery)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    key = secret.encode() if isinstance(secret, str) else secret
    repository = payload.get("repository") if isinstance(payload, Mapping) else None
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/5f3a1b2",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": str(hook_id),
        "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": sign(secret, body),
    }
    if isinstance(repository, Mapping):
        headers["X-GitHub-Hook-Installation-Target-Type"] = "repository"
        headers["X-GitHub-Hook-Installation-Target-ID"] = str(repository.get("id"))
    return body, headers


def issues_payload(
    fake: FakeGitHub,
    action: str,
    repo: str,
    number: int,
    *,
    sender: str | None = None,
    label: str | None = None,
    assignee: str | None = None,
    changes: JSON | None = None,
) -> JSON:
    """An ``issues`` event for the issue's current state. ``labeled``/``unlabeled`` take
    ``label``; ``assigned``/``unassigned`` take ``assignee``; ``edited`` takes ``changes``
    such as ``{"title": {"from": "old"}}``."""
    if action not in ISSUES_ACTIONS:
        raise ValueError(f"unsupported issues action {action!r}")
    shapes = fake.shapes()
    issue = fake.issue(repo, number)
    payload: JSON = {"action": action, "issue": shapes.issue(issue)}
    if action in ("labeled", "unlabeled"):
        if label is None:
            raise ValueError(f"{action} needs label=")
        payload["label"] = shapes.label(fake.repos[repo], label)
    if action in ("assigned", "unassigned"):
        if assignee is None:
            raise ValueError(f"{action} needs assignee=")
        payload["assignee"] = shapes.user(assignee)
    if action == "edited":
        payload["changes"] = changes or {}
    if sender is None:
        sender = issue.closed_by if action == "closed" and issue.closed_by else issue.user
    return payload | _envelope(fake, repo, sender)


def issue_comment_payload(
    fake: FakeGitHub,
    repo: str,
    number: int,
    comment_id: int,
    *,
    action: str = "created",
    sender: str | None = None,
) -> JSON:
    """An ``issue_comment`` event (``created`` by default) for an existing comment."""
    shapes = fake.shapes()
    issue = fake.issue(repo, number)
    comment = next(c for c in issue.comments if c.id == comment_id)
    payload: JSON = {
        "action": action,
        "issue": shapes.issue(issue),
        "comment": shapes.comment(issue, comment),
    }
    return payload | _envelope(fake, repo, sender or comment.user)


def pull_request_payload(
    fake: FakeGitHub,
    action: str,
    repo: str,
    number: int,
    *,
    sender: str | None = None,
) -> JSON:
    """A ``pull_request`` event (``opened``, ``closed`` — merged or not —, ``edited``, …)
    for the PR's current state; its body carries the "Fixes #N" that ``add_pull`` wrote."""
    issue = fake.issue(repo, number)
    payload: JSON = {
        "action": action,
        "number": number,
        "pull_request": fake.shapes().pull(issue),
    }
    return payload | _envelope(fake, repo, sender or issue.user)


def push_payload(
    fake: FakeGitHub, repo: str, sha: str, message: str, *, ref: str = "refs/heads/main"
) -> JSON:
    """A ``push`` of one commit (``sha``, ``message``) to ``ref``, in the documented shape
    (octokit/webhooks ``payload-schemas`` ``push``): it names no issue, though its message
    may reference some."""
    owner = fake.repos[repo].owner
    commit = {
        "id": sha,
        "tree_id": "0" * 40,
        "distinct": True,
        "message": message,
        "timestamp": iso(fake.clock.seconds),
        "url": f"https://github.com/{repo}/commit/{sha}",
        "author": {"name": owner, "email": f"{owner}@users.noreply.github.com"},
        "committer": {"name": owner, "email": f"{owner}@users.noreply.github.com"},
        "added": [],
        "removed": [],
        "modified": ["README.md"],
    }
    return {
        "ref": ref,
        "before": "0" * 39 + "1",
        "after": sha,
        "created": False,
        "deleted": False,
        "forced": False,
        "base_ref": None,
        "compare": f"https://github.com/{repo}/compare/{'0' * 12}...{sha[:12]}",
        "commits": [commit],
        "head_commit": commit,
        "pusher": {"name": owner, "email": f"{owner}@users.noreply.github.com"},
    } | _envelope(fake, repo, None)


def ping_payload(
    fake: FakeGitHub,
    repo: str,
    *,
    hook_id: int = 123_456_789,
    url: str = "https://bridge.example/webhooks/github",
    events: tuple[str, ...] = ("issues", "issue_comment", "pull_request"),
) -> JSON:
    """The ``ping`` GitHub sends when a repository webhook is created."""
    hooks = f"{fake.api_url}/repos/{repo}/hooks/{hook_id}"
    now = iso(fake.clock.seconds)
    return {
        "zen": "Keep it logically awesome.",
        "hook_id": hook_id,
        "hook": {
            "type": "Repository",
            "id": hook_id,
            "name": "web",
            "active": True,
            "events": list(events),
            "config": {"content_type": "json", "insecure_ssl": "0", "url": url},
            "updated_at": now,
            "created_at": now,
            "url": hooks,
            "test_url": f"{hooks}/test",
            "ping_url": f"{hooks}/pings",
            "deliveries_url": f"{hooks}/deliveries",
            "last_response": {"code": None, "status": "unused", "message": None},
        },
    } | _envelope(fake, repo, None)


def _envelope(fake: FakeGitHub, repo: str, sender: str | None) -> JSON:
    shapes = fake.shapes()
    return {
        "repository": shapes.repository(fake.repos[repo]),
        "sender": shapes.user(sender or fake.repos[repo].owner),
    }


def label_payload(
    fake: FakeGitHub, action: str, repo: str, name: str, *, changes: JSON | None = None
) -> JSON:
    """A ``label`` event (``created``, ``edited``, ``deleted``) for the label as it is now
    (a deleted one: ``name`` rendered as a bare label). A rename is ``edited`` with
    ``changes={"name": {"from": old}}``."""
    known = fake.repos[repo].labels.get(name)
    shape = (
        fake.shapes().label(fake.repos[repo], name)
        if known is not None
        else {"id": 1, "name": name, "color": "ededed", "default": False, "description": None}
    )
    payload: JSON = {"action": action, "label": shape}
    if action == "edited":
        payload["changes"] = changes or {}
    return payload | _envelope(fake, repo, None)


def projects_v2_item_payload(
    fake: FakeGitHub,
    action: str,
    repo: str,
    number: int,
    *,
    org: str | None = None,
    content_type: str = "Issue",
) -> JSON:
    """A ``projects_v2_item`` event for the issue's card on an organisation's project, as
    GitHub sends it: the organisation and the item's ``content_node_id``, no repository.
    ``edited`` names the field that changed (``Status``)."""
    issue = fake.issue(repo, number)
    login = org or fake.repos[repo].owner
    now = iso(fake.clock.seconds)
    item: JSON = {
        "id": 10_000 + issue.id,
        "node_id": node_id("PVTI", issue.id),
        "project_node_id": node_id("PVT", 1),
        "content_node_id": node_id("I", issue.id),
        "content_type": content_type,
        "creator": fake.shapes().user(issue.user),
        "created_at": now,
        "updated_at": now,
        "archived_at": None,
    }
    payload: JSON = {"action": action, "projects_v2_item": item}
    if action == "edited":
        payload["changes"] = {
            "field_value": {
                "field_node_id": node_id("PVTSSF", 1),
                "field_type": "single_select",
                "field_name": "Status",
                "project_number": 1,
            }
        }
    return payload | {
        "organization": {
            "login": login,
            "id": 38_302_899,
            "node_id": node_id("O", 38_302_899),
            "url": f"{fake.api_url}/orgs/{login}",
            "description": "",
        },
        "sender": fake.shapes().user(issue.user),
    }


def organization(fake: FakeGitHub, login: str) -> JSON:
    """The ``organization`` object an organization's webhook adds to its deliveries."""
    return {
        "login": login,
        "id": 38_302_899,
        "node_id": node_id("O", 38_302_899),
        "url": f"{fake.api_url}/orgs/{login}",
        "description": "",
    }


def from_organization(fake: FakeGitHub, payload: JSON) -> JSON:
    """``payload`` as an organization's webhook sends it: with its ``organization``."""
    owner = str(payload["repository"]["owner"]["login"])
    return payload | {"organization": organization(fake, owner)}


def repository_payload(fake: FakeGitHub, action: str, repo: str) -> JSON:
    """A ``repository`` event (``created``, ``archived``, ``deleted``, ...) for the
    repository as it is now, from its organization's webhook."""
    return from_organization(fake, {"action": action} | _envelope(fake, repo, None))


def installation_repositories_payload(
    fake: FakeGitHub,
    action: str,
    *,
    added: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
    installation_id: int = 42_424_242,
) -> JSON:
    """An ``installation_repositories`` event (``added`` or ``removed``) of a GitHub App
    installation, naming the repositories as GitHub does (``id``, ``node_id``, ``name``,
    ``full_name``, ``private``)."""

    def brief(name: str) -> JSON:
        repo = fake.repos[name]
        rid = node_id("R", repo.id).replace("_kwDO", "_kgDO")
        return {
            "id": repo.id,
            "node_id": rid,
            "name": repo.name,
            "full_name": name,
            "private": False,
        }

    account = (added or removed or ("octo-org/x",))[0].split("/", 1)[0]
    return {
        "action": action,
        "installation": {
            "id": installation_id,
            "account": fake.shapes().user(account),
            "repository_selection": "selected",
            "app_id": 1_000,
            "target_type": "Organization",
        },
        "repository_selection": "selected",
        "repositories_added": [brief(name) for name in added],
        "repositories_removed": [brief(name) for name in removed],
        "requester": None,
        "sender": fake.shapes().user(fake.login),
    }
