"""GitLab webhooks: the ``X-Gitlab-Token`` shared secret (compared in constant time; GitLab
sends the secret itself, not an HMAC), the delivery id, and the issues a hook names."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.gitlab.mapping import mentioned_issues

TOKEN_HEADER = "x-gitlab-token"
EVENT_HEADER = "x-gitlab-event"
IDEMPOTENCY_HEADER = "idempotency-key"  # stable across GitLab's retries of one delivery
WEBHOOK_HEADER = "x-gitlab-webhook-uuid"
EVENT_UUID_HEADER = "x-gitlab-event-uuid"  # one per triggering request, shared by its hooks


def token_valid(secret: bytes, header: str | None) -> bool:
    if not header:
        return False
    return hmac.compare_digest(secret, header.encode())


def delivery_id(headers: Mapping[str, str]) -> str | None:
    """What identifies one delivery: ``Idempotency-Key`` (GitLab 17.4+, the same on every
    retry); before that, the webhook and event UUIDs together, which tell deliveries apart
    but change on a resend, so an old GitLab's retry is refreshed twice (harmless)."""
    if headers.get(IDEMPOTENCY_HEADER):
        return headers[IDEMPOTENCY_HEADER]
    event = headers.get(EVENT_UUID_HEADER)
    if not event:
        return None
    return f"{headers.get(WEBHOOK_HEADER, '')}:{event}"


def project_of(payload: Mapping[str, Any]) -> tuple[str | None, int | None]:
    project = payload.get("project") or {}
    path = project.get("path_with_namespace")
    pid = project.get("id")
    return (str(path) if path else None, int(pid) if isinstance(pid, int) else None)


def issues_named(payload: Mapping[str, Any], path: str) -> set[int]:
    kind = payload.get("object_kind")
    attributes = payload.get("object_attributes") or {}
    if kind == "issue" and attributes.get("iid"):
        return {int(attributes["iid"])}
    if kind == "note":
        issue = payload.get("issue") or {}
        return {int(issue["iid"])} if issue.get("iid") else set()
    if kind == "merge_request":
        return mentioned_issues(path, attributes)
    return set()
