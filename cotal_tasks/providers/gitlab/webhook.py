"""GitLab webhooks (``POST /webhooks/gitlab``): the ``X-Gitlab-Token`` shared secret
(compared in constant time; GitLab sends the secret itself, not an HMAC), the endpoint a
hook is for, the delivery id, and the issues a hook names."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.gitlab.group import GitLabGroupTracker
from cotal_tasks.providers.gitlab.mapping import mentioned_issues
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str
from cotal_tasks.providers.hosted.webhook import Scheme

TOKEN_HEADER = "x-gitlab-token"
EVENT_HEADER = "x-gitlab-event"
IDEMPOTENCY_HEADER = "idempotency-key"  # stable across GitLab's retries of one delivery
WEBHOOK_HEADER = "x-gitlab-webhook-uuid"
EVENT_UUID_HEADER = "x-gitlab-event-uuid"  # one per triggering request, shared by its hooks


def token_valid(secret: bytes, header: str | None) -> bool:
    if not header:
        return False
    return hmac.compare_digest(secret, header.encode())


def delivery_id(headers: Mapping[str, str], payload: Mapping[str, Any]) -> str:
    """What identifies one delivery: ``Idempotency-Key`` (GitLab 17.4+, the same on every
    retry); before that, the webhook and event UUIDs with the hook's kind and object.
    ``X-Gitlab-Event-UUID`` names the request that fired the hooks, so every hook one
    request fires shares it (a merge request's close fires its Merge Request Hook and the
    closed issue's Issue Hook), and before GitLab 16.2 there is no webhook UUID beside it:
    the kind and object tell those hooks apart, while a redelivery of one hook keeps all
    four. A retry of an old GitLab carries a new event UUID, so it is refreshed twice
    (harmless). An older release sends no event UUID: its delivery gets an id of its own,
    so it is taken and wakes the sync, undeduplicated (a repeat refreshes the issue again,
    which is harmless: the wake is only a hint, the refresh reads GitLab)."""
    if headers.get(IDEMPOTENCY_HEADER):
        return headers[IDEMPOTENCY_HEADER]
    event = headers.get(EVENT_UUID_HEADER)
    if not event:  # the webhook's UUID alone names the hook, not one delivery of it
        return f"unidentified:{secrets.token_hex(16)}"
    attributes = as_dict(payload.get("object_attributes"))
    thing = as_int(attributes.get("id")) or as_int(attributes.get("iid")) or ""
    kind = f"{headers.get(EVENT_HEADER, '')}/{as_str(payload.get('object_kind')) or ''}/{thing}"
    return f"{headers.get(WEBHOOK_HEADER, '')}:{event}:{kind}"


def project_of(payload: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The project's path and its stable id (the id survives a rename or a move)."""
    project = as_dict(payload.get("project"))
    path = as_str(project.get("path_with_namespace"))
    pid = as_int(project.get("id"))
    if pid is None:
        pid = as_int(payload.get("project_id"))
    return (path or None, pid)


def issues_named(payload: Mapping[str, Any], path: str, most: int | None = None) -> set[int]:
    """The issue iids a hook is about. A work item (a task, or an issue edited in the new
    UI on GitLab 17.x) comes as an Issue Hook with ``object_kind: "work_item"``: its iid is
    an issue iid of the project like any other. ``most``: a merge request's text is read
    no further once more are found."""
    kind = payload.get("object_kind")
    attributes = as_dict(payload.get("object_attributes"))
    if kind in ("issue", "work_item"):
        iid = as_int(attributes.get("iid"))
        return {iid} if iid else set()
    if kind == "note":
        iid = as_int(as_dict(payload.get("issue")).get("iid"))
        return {iid} if iid else set()
    if kind == "merge_request":
        return mentioned_issues(path, attributes, most)
    return set()


def named(tracker: GitLabTracker, most: int, event: str, payload: Mapping[str, Any]) -> set[int]:
    """The issues a delivery names, read with the project's path (the delivery's own,
    while a numeric project's path is not known yet). A group's source numbers them with
    the delivery's project (a group hook fires for every project of the group)."""
    path, pid = project_of(payload)
    if isinstance(tracker, GitLabGroupTracker):
        return tracker.numbers_named(pid, path, issues_named(payload, path or "", most))
    own = tracker.path if tracker.path_known else None
    return issues_named(payload, own or path or "", most)


SCHEME: Scheme[GitLabTracker] = Scheme(
    tracker="gitlab",
    label="GitLab",
    what="project",
    mismatch="the X-Gitlab-Token does not match. Set the webhook secret token to the "
    "one the endpoint's webhook_secret_env names",
    event_header=EVENT_HEADER,
    verify=lambda secret, headers, body: token_valid(secret, headers.get(TOKEN_HEADER)),
    source=project_of,
    delivery=delivery_id,
    named=named,
    # A merge request's change, or a push (its commits may move a merge request), that
    # moves no issue: the next poll sweeps the merge requests (``hosted.cadence``).
    moves=frozenset({"Merge Request Hook", "Push Hook"}),
)
WEBHOOK = SCHEME.webhook()
