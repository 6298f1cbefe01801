"""GitHub webhooks: verify ``X-Hub-Signature-256`` and name the issues a delivery touches.

The signature is ``sha256=<hex HMAC-SHA256(secret, raw body)>``, compared in constant
time. A delivery only wakes the sync for the issues it names; polling stays the truth.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.github.mapping import is_pull_request, mentioned_issues
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str

SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADER = "x-github-delivery"
EVENT_HEADER = "x-github-event"
PING = "ping"  # sent when a hook is created; an organisation's carries no repository


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def repository_of(payload: Mapping[str, Any]) -> str | None:
    name = as_str(as_dict(payload.get("repository")).get("full_name"))
    return name or None


def repository_id(payload: Mapping[str, Any]) -> int | None:
    """The repository's stable id: it survives a rename or a transfer of the repository."""
    return as_int(as_dict(payload.get("repository")).get("id"))


def issues_named(event: str, payload: Mapping[str, Any], repository: str) -> set[int]:
    """The issue numbers a delivery is about (none for events the sync does not need)."""
    if event in ("issues", "issue_comment"):
        issue = as_dict(payload.get("issue"))
        if is_pull_request(issue):
            return mentioned_issues(repository, issue)
        number = as_int(issue.get("number"))
        return {number} if number else set()
    if event == "pull_request":
        return mentioned_issues(repository, as_dict(payload.get("pull_request")))
    return set()
