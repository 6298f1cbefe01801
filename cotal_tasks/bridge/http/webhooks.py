"""Webhook receivers: ``POST /webhooks/github`` and ``POST /webhooks/gitlab``.

A delivery is authenticated first (GitHub's HMAC signature, GitLab's shared token, both
compared in constant time); a bad one is 401 and changes nothing. A delivery seen before
(by its delivery id) is acknowledged and ignored. Otherwise it only wakes the endpoint's
sync for the issues it names: polling stays the source of truth.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from cotal_tasks.bridge.wiring import Endpoint, wall_clock_ms
from cotal_tasks.core import ContractError
from cotal_tasks.providers.github import webhook as github
from cotal_tasks.providers.gitlab import webhook as gitlab
from cotal_tasks.providers.hosted.boundary import Reason

log = logging.getLogger(__name__)

NOT_AN_OBJECT = "the body is not a JSON object. Send the tracker's JSON webhook payload"
DELIVERY_KEEP_MS = 3 * 24 * 3600 * 1000  # GitHub redelivers up to three days back


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _reply(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


UNMAPPABLE: Reason = "webhook-unmappable"
ID_KEY = "webhook-project-id"  # beside the sync checkpoint: the id deliveries carry


class Matcher:
    """Finds the endpoint a delivery is for: by the repository's or project's stable id
    first, then by path. Ids come from the configuration (a GitLab project id), from the
    tracker (``known_id``: GitLab issues carry their project's id), and from earlier
    verified deliveries matched by path, kept beside the mirror; so a repository or
    project renamed after that keeps its deliveries."""

    def __init__(self, endpoints: Sequence[Endpoint], path: Callable[[Endpoint], str]) -> None:
        self.endpoints = [ep for ep in endpoints if ep.hosted is not None]
        self.path = path
        self.ids: dict[int, Endpoint] = {}
        self._loaded = False

    async def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for ep in self.endpoints:
            assert ep.hosted is not None
            configured = self.path(ep)
            if configured.isdigit():
                self.ids[int(configured)] = ep
            try:
                saved = await ep.hosted.store.mirror.state().load(ID_KEY)
            except ContractError:
                continue
            if saved and isinstance(saved.get("id"), int):
                self.ids.setdefault(saved["id"], ep)

    def _by_id(self, pid: int) -> Endpoint | None:
        if pid in self.ids:
            return self.ids[pid]
        for ep in self.endpoints:
            tracker = ep.hosted.store.tracker if ep.hosted else None
            if getattr(tracker, "known_id", None) == pid:
                return ep
        return None

    async def find(
        self, pid: int | None, path: str | None, verifies: Callable[[Endpoint], bool]
    ) -> Endpoint | None:
        await self._load()
        if pid is not None and (found := self._by_id(pid)) is not None:
            return found
        named = [ep for ep in self.endpoints if path and self.path(ep).lower() == path.lower()]
        if not named:
            return None
        found = named[0]
        if pid is not None and verifies(found):  # learn the id, so a rename keeps working
            self.ids[pid] = found
            assert found.hosted is not None
            try:
                await found.hosted.store.mirror.state().save(ID_KEY, {"id": pid}, wall_clock_ms())
            except ContractError as exc:
                name = found.config.name
                log.warning("could not keep the project id of %s: %s", name, exc.message)
        return found


def github_receiver(endpoints: Sequence[Endpoint]) -> Route:
    matcher = Matcher(
        [ep for ep in endpoints if ep.config.github is not None],
        lambda ep: ep.config.github.repository if ep.config.github else "",
    )

    async def receive(request: Request) -> JSONResponse:
        body = await request.body()
        payload = _json_object(body)
        if payload is None:
            return _reply(400, NOT_AN_OBJECT)
        signature = request.headers.get(github.SIGNATURE_HEADER)

        def verifies(ep: Endpoint) -> bool:
            secret = ep.hosted.webhook_secret if ep.hosted else None
            return secret is not None and github.signature_valid(secret, body, signature)

        event = request.headers.get(github.EVENT_HEADER, "")
        repo, rid = github.repository_of(payload), github.repository_id(payload)
        if event == github.PING and repo is None:
            # An organisation's hook says hello: no repository, nothing to sync.
            if any(verifies(ep) for ep in matcher.endpoints):
                return _reply(200, "pong")
            return _reply(
                401,
                "the X-Hub-Signature-256 signature matches no endpoint's secret. Set the webhook "
                "secret to the one the endpoint's webhook_secret_env names",
            )
        endpoint = await matcher.find(rid, repo, verifies)
        if endpoint is None or endpoint.hosted is None:
            return _reply(
                404,
                "no endpoint of this bridge syncs that repository. Point the webhook at the "
                "bridge that syncs it, or add an endpoint for the repository",
            )
        hosted = endpoint.hosted
        if hosted.webhook_secret is None:
            return _reply(
                401, "this endpoint has no webhook secret configured; set webhook_secret_env"
            )
        if not verifies(endpoint):
            return _reply(
                401,
                "the X-Hub-Signature-256 signature does not match. Set the webhook secret to "
                "the one the endpoint's webhook_secret_env names",
            )
        own = endpoint.config.github.repository if endpoint.config.github else ""
        named = hosted.store.tracker.boundary.map(
            f"{event} delivery", github.issues_named, event, payload, own, reason=UNMAPPABLE
        )
        return await _accept(endpoint, request.headers.get(github.DELIVERY_HEADER), named, "github")

    return Route("/webhooks/github", receive, methods=["POST"])


def gitlab_receiver(endpoints: Sequence[Endpoint]) -> Route:
    matcher = Matcher(
        [ep for ep in endpoints if ep.config.gitlab is not None],
        lambda ep: ep.config.gitlab.project if ep.config.gitlab else "",
    )

    async def receive(request: Request) -> JSONResponse:
        payload = _json_object(await request.body())
        if payload is None:
            return _reply(400, NOT_AN_OBJECT)
        token = request.headers.get(gitlab.TOKEN_HEADER)

        def verifies(ep: Endpoint) -> bool:
            secret = ep.hosted.webhook_secret if ep.hosted else None
            return secret is not None and gitlab.token_valid(secret, token)

        path, pid = gitlab.project_of(payload)
        endpoint = await matcher.find(pid, path, verifies)
        if endpoint is None or endpoint.hosted is None:
            return _reply(
                404,
                "no endpoint of this bridge syncs that project. Point the webhook at the "
                "bridge that syncs it, or add an endpoint for the project",
            )
        if endpoint.hosted.webhook_secret is None:
            return _reply(
                401, "this endpoint has no webhook secret configured; set webhook_secret_env"
            )
        if not verifies(endpoint):
            return _reply(
                401,
                "the X-Gitlab-Token does not match. Set the webhook secret token to the one "
                "the endpoint's webhook_secret_env names",
            )
        tracker = endpoint.hosted.store.tracker
        own = getattr(tracker, "path", None) or path or ""
        named = tracker.boundary.map(
            "hook delivery", gitlab.issues_named, payload, own, reason=UNMAPPABLE
        )
        return await _accept(endpoint, gitlab.delivery_id(request.headers), named, "gitlab")

    return Route("/webhooks/gitlab", receive, methods=["POST"])


async def _accept(
    endpoint: Endpoint, delivery: str | None, named: set[int] | None, tracker: str
) -> JSONResponse:
    """Deduplicate a verified delivery by its id, then wake the sync for what it names
    (``None``: the payload named nothing readable; the poll finds the change)."""
    hosted = endpoint.hosted
    assert hosted is not None
    numbers = named or set()
    if not delivery:
        return _reply(
            400,
            "the delivery id header is missing. Send the delivery as the tracker sends it, "
            "with its delivery headers",
        )
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
