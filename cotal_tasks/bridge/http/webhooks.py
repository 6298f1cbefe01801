"""Webhook receivers: ``POST /webhooks/github`` and ``POST /webhooks/gitlab``.

A delivery is authenticated first (GitHub's HMAC signature, GitLab's shared token, both
compared in constant time); a bad one is 401 and changes nothing. A delivery seen before
(by its delivery id) is acknowledged and ignored. Otherwise it only wakes the endpoint's
sync for the issues it names: polling stays the source of truth.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from cotal_tasks.bridge.app import Endpoint, wall_clock_ms
from cotal_tasks.core import ContractError
from cotal_tasks.providers.github import webhook as github
from cotal_tasks.providers.gitlab import webhook as gitlab

log = logging.getLogger(__name__)

DELIVERY_KEEP_MS = 3 * 24 * 3600 * 1000  # GitHub redelivers up to three days back


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _reply(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


def github_receiver(endpoints: Sequence[Endpoint]) -> Route:
    by_repo = {
        ep.config.github.repository.lower(): ep
        for ep in endpoints
        if ep.config.github is not None and ep.hosted is not None
    }

    async def receive(request: Request) -> JSONResponse:
        body = await request.body()
        payload = _json_object(body)
        if payload is None:
            return _reply(400, "the body is not a JSON object")
        repo = github.repository_of(payload)
        endpoint = by_repo.get(repo.lower()) if repo else None
        if endpoint is None or endpoint.hosted is None:
            return _reply(404, "no endpoint of this bridge syncs that repository")
        hosted = endpoint.hosted
        if hosted.webhook_secret is None:
            return _reply(
                401, "this endpoint has no webhook secret configured; set webhook_secret_env"
            )
        if not github.signature_valid(
            hosted.webhook_secret, body, request.headers.get(github.SIGNATURE_HEADER)
        ):
            return _reply(401, "the X-Hub-Signature-256 signature does not match")
        event = request.headers.get(github.EVENT_HEADER, "")
        return await _accept(
            endpoint,
            request.headers.get(github.DELIVERY_HEADER),
            github.issues_named(event, payload, repo or ""),
            "github",
        )

    return Route("/webhooks/github", receive, methods=["POST"])


def gitlab_receiver(endpoints: Sequence[Endpoint]) -> Route:
    hosted = [ep for ep in endpoints if ep.config.gitlab is not None and ep.hosted is not None]

    def find(path: str | None, pid: int | None) -> Endpoint | None:
        for ep in hosted:
            project = ep.config.gitlab.project if ep.config.gitlab else ""
            if project.lower() == (path or "").lower() or project == str(pid):
                return ep
        return None

    async def receive(request: Request) -> JSONResponse:
        payload = _json_object(await request.body())
        if payload is None:
            return _reply(400, "the body is not a JSON object")
        path, pid = gitlab.project_of(payload)
        endpoint = find(path, pid)
        if endpoint is None or endpoint.hosted is None:
            return _reply(404, "no endpoint of this bridge syncs that project")
        secret = endpoint.hosted.webhook_secret
        if secret is None:
            return _reply(
                401, "this endpoint has no webhook secret configured; set webhook_secret_env"
            )
        if not gitlab.token_valid(secret, request.headers.get(gitlab.TOKEN_HEADER)):
            return _reply(401, "the X-Gitlab-Token does not match")
        return await _accept(
            endpoint,
            gitlab.delivery_id(request.headers),
            gitlab.issues_named(payload, path or ""),
            "gitlab",
        )

    return Route("/webhooks/gitlab", receive, methods=["POST"])


async def _accept(
    endpoint: Endpoint, delivery: str | None, numbers: set[int], tracker: str
) -> JSONResponse:
    """Deduplicate a verified delivery by its id, then wake the sync for what it names."""
    hosted = endpoint.hosted
    assert hosted is not None
    if not delivery:
        return _reply(400, "the delivery id header is missing")
    try:
        first = await hosted.store.mirror.state().first_delivery(
            f"{tracker}:{delivery}", wall_clock_ms(), DELIVERY_KEEP_MS
        )
    except ContractError as exc:
        return _reply(503, exc.message)
    if not first:
        return _reply(200, "delivery already received")
    if numbers:
        hosted.sync.wake(numbers)
    return _reply(202, f"accepted; {len(numbers)} issue(s) to refresh")


def webhook_routes(endpoints: Sequence[Endpoint]) -> list[BaseRoute]:
    return [github_receiver(endpoints), gitlab_receiver(endpoints)]
