"""Jira Cloud webhooks (``POST /webhooks/jira``): verify ``X-Hub-Signature``, find the
endpoint a delivery is for by the project's stable id (then its key), and name the issue
it touches.

A webhook registered with a secret signs each delivery: ``X-Hub-Signature`` is
``sha256=<hex HMAC-SHA256(secret, raw body)>``, compared in constant time. The delivery
id is ``X-Atlassian-Webhook-Identifier`` (the same on Jira's retries of a delivery).
``jira:issue_created``, ``jira:issue_updated``, ``jira:issue_deleted`` and the comment
events wake the sync for their issue; any other event is acknowledged and does nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str, at_path
from cotal_tasks.providers.hosted.webhook import Scheme
from cotal_tasks.providers.jira import mapping
from cotal_tasks.providers.jira.tracker import JiraTracker

SIGNATURE_HEADER = "x-hub-signature"
DELIVERY_HEADER = "x-atlassian-webhook-identifier"
EVENT_FIELD = "webhookEvent"  # Jira names the event in the payload, not in a header
WAKING = frozenset(
    {
        "jira:issue_created",
        "jira:issue_updated",
        "jira:issue_deleted",
        "comment_created",
        "comment_updated",
        "comment_deleted",
    }
)


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def project_of(payload: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The issue's project key and its stable id (the id survives a key change)."""
    project = as_dict(at_path(payload, "issue", "fields", "project"))
    key = as_str(project.get("key"))
    if key is None and (parsed := mapping.split_key(at_path(payload, "issue", "key"))):
        key = parsed[0]
    return key, as_int(project.get("id"))


def issues_named(payload: Mapping[str, Any], project: str) -> set[int]:
    if payload.get(EVENT_FIELD) not in WAKING:
        return set()
    parsed = mapping.split_key(at_path(payload, "issue", "key"))
    if parsed is None:
        raise ValueError("the delivery names no issue key")
    where, number = parsed
    return {number} if where == project else set()


def named(tracker: JiraTracker, most: int, event: str, payload: Mapping[str, Any]) -> set[int]:
    return issues_named(payload, tracker.path)  # one issue at most: ``most`` never binds


SCHEME: Scheme[JiraTracker] = Scheme(
    tracker="jira",
    label="Jira",
    what="project",
    mismatch="the X-Hub-Signature does not match. Set the webhook's secret in Jira "
    "to the one the endpoint's webhook_secret_env names",
    event_header=EVENT_FIELD.lower(),
    verify=lambda secret, headers, body: signature_valid(
        secret, body, headers.get(SIGNATURE_HEADER)
    ),
    source=project_of,
    delivery_header=DELIVERY_HEADER,
    named=named,
)
WEBHOOK = SCHEME.webhook()
