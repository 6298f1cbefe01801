"""GitHub webhooks (``POST /webhooks/github``): verify ``X-Hub-Signature-256``, find the
endpoint a delivery is for, and name the issues it touches.

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
from cotal_tasks.providers.hosted.webhook import Scheme, receiver
from cotal_tasks.providers.provider import Webhook

SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADER = "x-github-delivery"
EVENT_HEADER = "x-github-event"
PING = "ping"  # sent when a hook is created; an organisation's carries no repository


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


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


def source(payload: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The repository's full name and its stable id (the id survives a rename or a
    transfer of the repository)."""
    repository = as_dict(payload.get("repository"))
    return (as_str(repository.get("full_name")) or None, as_int(repository.get("id")))


WEBHOOK = Webhook(
    "github",
    receiver(
        Scheme(
            tracker="github",
            what="repository",
            mismatch="the X-Hub-Signature-256 signature does not match. Set the webhook "
            "secret to the one the endpoint's webhook_secret_env names",
            event_header=EVENT_HEADER,
            verify=lambda secret, headers, body: signature_valid(
                secret, body, headers.get(SIGNATURE_HEADER)
            ),
            source=source,
            delivery=lambda headers: headers.get(DELIVERY_HEADER),
            named=lambda endpoint, event, payload: issues_named(event, payload, endpoint.path),
            # An organisation's hook says hello: no repository, nothing to sync.
            hello=lambda event, payload: event == PING,
        )
    ),
)
