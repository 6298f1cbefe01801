"""GitHub webhooks (``POST /webhooks/github``): verify ``X-Hub-Signature-256``, find the
endpoint a delivery is for, and name the issues it touches.

The signature is ``sha256=<hex HMAC-SHA256(secret, raw body)>``, compared in constant
time. A delivery only wakes the sync for the issues it names (and a ``push``, which names
none, the next poll's read of the issue events feed); polling stays the truth.

Two kinds of edit move no issue's ``updated_at``, so no poll would see them: a ``label``
renamed (``edited`` with ``changes.name``) or ``deleted`` (one a status rule reads), and a
Projects v2 card moved
(``projects_v2_item``, an organisation's delivery naming the issue by node id). A rename
refreshes the issues listed with the new name (``webhook_max_issues`` of them at most;
more, or a deletion, whose issues no listing can find: the next poll reads every issue
again); a card refreshes its issue, with its Projects v2 Status, once GraphQL says it is
an issue of this endpoint's repository.

An endpoint over an organization's repositories, or an App installation's
(``github.discovery``), takes the organization's webhook, or the App's: its deliveries
go to the repository they name (``repository.full_name``), as a repository webhook's do;
one about a repository of the organization (or installation) that the endpoint does not
read is ignored (200), and a ``repository`` event (created, deleted, archived,
unarchived, renamed, transferred) or an ``installation_repositories`` one (added,
removed) discovers the repositories again at once.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.github.mapping import is_pull_request, mentioned_issues
from cotal_tasks.providers.github.tracker import GitHubTracker
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str
from cotal_tasks.providers.hosted.webhook import Scheme
from cotal_tasks.providers.provider import Looked

SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADER = "x-github-delivery"
EVENT_HEADER = "x-github-event"
PING = "ping"  # sent when a hook is created; an organisation's carries no repository
LABEL = "label"
CARD = "projects_v2_item"  # an organisation's project's item: created, edited, moved...
PUSH = "push"  # commits pushed to a branch: names no issue, wakes the issue events feed


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def issues_named(
    event: str, payload: Mapping[str, Any], repository: str, most: int | None = None
) -> set[int]:
    """The issue numbers a delivery is about (none for events the sync does not need);
    ``most``: a pull request's text is read no further once more are found."""
    if event in ("issues", "issue_comment"):
        issue = as_dict(payload.get("issue"))
        if is_pull_request(issue):
            return mentioned_issues(repository, issue, most)
        number = as_int(issue.get("number"))
        return {number} if number else set()
    if event == "pull_request":
        return mentioned_issues(repository, as_dict(payload.get("pull_request")), most)
    return set()


async def lookup(
    tracker: GitHubTracker, most: int, event: str, payload: Mapping[str, Any]
) -> Looked | None:
    """The issues a ``label`` or ``projects_v2_item`` delivery names, as the endpoint's
    tracker finds them (``None``: none of this endpoint, or another event); ``most`` is
    the endpoint's ``webhook_max_issues``."""
    if event == LABEL:
        return await _label(tracker, most, payload)
    if event == CARD:
        return await _card(tracker, payload)
    return None


async def _label(tracker: GitHubTracker, most: int, payload: Mapping[str, Any]) -> Looked | None:
    """Only a label a status rule reads can change a task (its name is the status's
    ``statusSource``): a rename from or to one, or its deletion."""
    read = {rule.label.casefold() for rule in tracker.config.status_rules if rule.label}
    action = payload.get("action")
    name = as_str(as_dict(payload.get("label")).get("name")) or ""
    if action == "deleted":
        # Gone from its issues: no listing finds them any more.
        return Looked(None) if name.casefold() in read else None
    renamed = as_dict(as_dict(payload.get("changes")).get("name")).get("from")
    if action != "edited" or not isinstance(renamed, str) or not name:
        return None  # a colour or a description: no mapping reads those
    if not read & {name.casefold(), renamed.casefold()}:
        return None
    if "," in name:  # the listing's filter splits names at commas
        return Looked(None)
    numbers = await tracker.client.labelled_numbers(name, most)
    return Looked(None if numbers is None else frozenset(numbers))


async def _card(tracker: GitHubTracker, payload: Mapping[str, Any]) -> Looked | None:
    item = as_dict(payload.get(CARD))
    node = as_str(item.get("content_node_id"))
    if item.get("content_type") != "Issue" or not node:
        return None  # a draft or a pull request: no issue of any endpoint
    found = await tracker.client.issue_of_node(tracker.config.graphql_endpoint(), node)
    if found is None or found[0].lower() != tracker.repo.lower():
        return None
    return Looked(frozenset({found[1]}))


def about(config: GitHubConfig, payload: Mapping[str, Any]) -> bool:
    """Whether a delivery comes from where ``config`` discovers its repositories: an App
    installation's (it carries ``installation``; the App's secret verified it), or the
    organization's (its repository's owner, the ``organization``, or the installation's
    account is the organization)."""
    if config.installation:
        return bool(as_dict(payload.get("installation")))
    if config.organization is None:
        return False
    owners = (
        as_dict(as_dict(payload.get("repository")).get("owner")).get("login"),
        as_dict(payload.get("organization")).get("login"),
        as_dict(as_dict(payload.get("installation")).get("account")).get("login"),
    )
    org = config.organization.casefold()
    return any(isinstance(login, str) and login.casefold() == org for login in owners)


def source(payload: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The repository's full name and its stable id (the id survives a rename or a
    transfer of the repository)."""
    repository = as_dict(payload.get("repository"))
    return (as_str(repository.get("full_name")) or None, as_int(repository.get("id")))


SCHEME: Scheme[GitHubTracker] = Scheme(
    tracker="github",
    label="GitHub",
    what="repository",
    mismatch="the X-Hub-Signature-256 signature does not match. Set the webhook "
    "secret to the one the endpoint's webhook_secret_env names",
    event_header=EVENT_HEADER,
    verify=lambda secret, headers, body: signature_valid(
        secret, body, headers.get(SIGNATURE_HEADER)
    ),
    source=source,
    delivery_header=DELIVERY_HEADER,
    named=lambda tracker, most, event, payload: issues_named(event, payload, tracker.repo, most),
    # An organisation's hook says hello: no repository, nothing to sync.
    hello=lambda event, payload: event == PING,
    lookup=lookup,
    lookup_events=frozenset({LABEL, CARD}),
    # A push names no issue, but its commits may reference some (``referenced`` events
    # the listing never shows); an issue or pull request delivery comes with activity
    # that may too: the next poll reads the issue events feed (``cadence``).
    moves=frozenset({PUSH, "issues", "pull_request"}),
    # created, deleted, archived, unarchived, renamed, transferred; added, removed
    rediscover_events=frozenset({"repository", "installation_repositories"}),
    about=lambda tracker, payload: about(tracker.config, payload),
)
WEBHOOK = SCHEME.webhook()
