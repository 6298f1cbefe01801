"""GitLab webhooks: the ``X-Gitlab-Token`` shared secret (compared in constant time; GitLab
sends the secret itself, not an HMAC), the delivery id, and the issues a hook names."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.gitlab.mapping import mentioned_issues

TOKEN_HEADER = "x-gitlab-token"
EVENT_HEADER = "x-gitlab-event"
DELIVERY_HEADERS = ("x-gitlab-event-uuid", "idempotency-key")


def token_valid(secret: bytes, header: str | None) -> bool:
    if not header:
        return False
    return hmac.compare_digest(secret, header.encode())


def delivery_id(headers: Mapping[str, str]) -> str | None:
    for name in DELIVERY_HEADERS:
        if headers.get(name):
            return headers[name]
    return None


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
