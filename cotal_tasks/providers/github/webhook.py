"""GitHub webhooks (``POST /webhooks/github``): verify ``X-Hub-Signature-256``, find the
endpoint a delivery is for, and name the issues it touches.

The signature is ``sha256=<hex HMAC-SHA256(secret, raw body)>``, compared in constant
time. A delivery only wakes the sync for the issues it names; polling stays the truth.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from cotal_tasks.providers.github.mapping import is_pull_request, mentioned_issues
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_str
from cotal_tasks.providers.hosted.webhook import (
    NOT_AN_OBJECT,
    UNMAPPABLE,
    HookTarget,
    Matcher,
    accept,
    find_verified,
    json_object,
    targets,
)
from cotal_tasks.providers.provider import Receive, Webhook, WebhookReceiver, WebhookReply

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


def receiver(receivers: Sequence[WebhookReceiver]) -> Receive:
    """The route's handler over the GitHub endpoints' receivers."""
    matcher = Matcher(targets(receivers))

    async def receive(headers: Mapping[str, str], body: bytes) -> WebhookReply:
        payload = json_object(body)
        if payload is None:
            return WebhookReply(400, NOT_AN_OBJECT)
        signature = headers.get(SIGNATURE_HEADER)

        def verifies(ep: HookTarget) -> bool:
            return ep.secret is not None and signature_valid(ep.secret, body, signature)

        event = headers.get(EVENT_HEADER, "")
        repo, rid = repository_of(payload), repository_id(payload)
        if event == PING and repo is None:
            # An organisation's hook says hello: no repository, nothing to sync.
            if any(verifies(ep) for ep in matcher.endpoints):
                return WebhookReply(200, "pong")
            return WebhookReply(
                401,
                "the X-Hub-Signature-256 signature matches no endpoint's secret. Set the webhook "
                "secret to the one the endpoint's webhook_secret_env names",
            )
        endpoint = await find_verified(
            matcher,
            rid,
            repo,
            verifies,
            what="repository",
            mismatch="the X-Hub-Signature-256 signature does not match. Set the webhook secret "
            "to the one the endpoint's webhook_secret_env names",
        )
        if isinstance(endpoint, WebhookReply):
            return endpoint
        named = endpoint.boundary.map(
            f"{event} delivery", issues_named, event, payload, endpoint.path, reason=UNMAPPABLE
        )
        return await accept(endpoint, headers.get(DELIVERY_HEADER), named, "github")

    return receive


WEBHOOK = Webhook("github", receiver)
