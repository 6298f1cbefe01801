"""GitHub webhooks: verify ``X-Hub-Signature-256`` and name the issues a delivery touches.

The signature is ``sha256=<hex HMAC-SHA256(secret, raw body)>``, compared in constant
time. A delivery only wakes the sync for the issues it names; polling stays the truth.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.github.mapping import mentioned_issues

SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADER = "x-github-delivery"
EVENT_HEADER = "x-github-event"


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def repository_of(payload: Mapping[str, Any]) -> str | None:
    repo = payload.get("repository")
    if isinstance(repo, dict) and isinstance(repo.get("full_name"), str):
        return str(repo["full_name"])
    return None


def issues_named(event: str, payload: Mapping[str, Any], repository: str) -> set[int]:
    """The issue numbers a delivery is about (none for events the sync does not need)."""
    if event in ("issues", "issue_comment"):
        issue = payload.get("issue") or {}
        if "pull_request" in issue:
            return mentioned_issues(repository, issue)
        return {int(issue["number"])} if issue.get("number") else set()
    if event == "pull_request":
        return mentioned_issues(repository, payload.get("pull_request") or {})
    return set()
