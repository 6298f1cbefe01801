"""A small Linear GraphQL client on the shared ``TrackerHttp``.

Auth: a personal API key is sent as it is (``Authorization: <key>``), an OAuth access
token (an app's ``actor=app`` token included) as ``Bearer``; neither is ever logged.

Rate limits: Linear meters requests and query complexity in leaky buckets, and reports
both budgets on every answer (``X-RateLimit-Requests-*``, ``X-RateLimit-Complexity-*``,
resets in epoch ms; ``X-Complexity`` is what the query cost). A limited request is
answered 429, or 400 with the GraphQL error code ``RATELIMITED``: it waits for
``Retry-After``, else the reset of the budget that ran out. An answer carrying
``errors`` and no data is refused (``LinearRefused``); "Entity not found" is
``NotFound`` (404).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_str
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import (
    RETRYABLE_STATUS,
    TrackerHttp,
    TrackerHttpError,
    backoff,
    origin,
    retry_after,
)

_RATE_CODES = frozenset({"RATELIMITED", "ratelimited"})
_NOT_FOUND = ("entity not found", "could not find referenced")
_BUDGETS = ("requests", "complexity")


class LinearRefused(TrackerHttpError):
    """Linear answered a query or mutation with errors and no data."""


class NotFound(LinearRefused):
    """Linear says the entity asked for does not exist (or is not this token's to see)."""


def _errors(body: Any) -> list[Mapping[str, Any]]:
    return [as_dict(e) for e in as_list(as_dict(body).get("errors"))]


def _rate_limited(errors: list[Mapping[str, Any]]) -> bool:
    for error in errors:
        extensions = as_dict(error.get("extensions"))
        if extensions.get("code") in _RATE_CODES or extensions.get("type") in _RATE_CODES:
            return True
    return False


def reset_wait(headers: Mapping[str, str], now_s: float) -> float | None:
    """Seconds until the spent budget refills (its reset, epoch ms), the later of the
    two when both are spent; ``None`` when neither header says."""
    waits = []
    for pool in _BUDGETS:
        remaining = headers.get(f"x-ratelimit-{pool}-remaining", "").strip()
        reset = headers.get(f"x-ratelimit-{pool}-reset", "").strip()
        if remaining in ("0", "") and reset.isdigit():
            waits.append(int(reset) / 1000 - now_s)
    return max(1.0, max(waits)) if waits else None


def linear_wait(response: httpx.Response, attempt: int, now_s: float) -> float | None:
    """The ``RetryPolicy``: seconds to wait before asking again, or ``None``: never."""
    status = response.status_code
    limited = status == 429
    if status == 400:
        try:
            limited = _rate_limited(_errors(json.loads(response.content)))
        except ValueError:
            limited = False
    if limited:
        waited = retry_after(response.headers, now_s)
        if waited is None:
            waited = reset_wait(response.headers, now_s)
        return waited if waited is not None else 60.0 * 2.0 ** (attempt - 1)
    if status in RETRYABLE_STATUS:
        waited = retry_after(response.headers, now_s)
        return waited if waited is not None else backoff(attempt)
    return None  # 400, 401, 403: refusals, never retried


def linear_http_client(
    api_url: str, token: str, timeout_s: float, *, oauth: bool
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=origin(httpx.URL(api_url)) + "/",
        headers={
            "Authorization": f"Bearer {token}" if oauth else token,
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "cotal-tasks",
        },
        timeout=timeout_s,
    )


class LinearClient:
    """GraphQL over the tracker's HTTP client; counts what it asked (for the bench)."""

    def __init__(self, http: TrackerHttp, api_url: str) -> None:
        self.http = http
        self.path = httpx.URL(api_url).path.lstrip("/") or "graphql"
        self.requests = 0  # every request sent
        self.complexity = 0  # the points Linear said they cost (``X-Complexity``)

    async def query(self, document: str, variables: Mapping[str, Any]) -> Mapping[str, Any]:
        """The answer's ``data``; ``LinearRefused`` (``NotFound``) when it has none."""
        self.requests += 1
        try:
            response = await self.http.request(
                "POST", self.path, json={"query": document, "variables": dict(variables)}
            )
        except TrackerHttpError as exc:
            if exc.status == 400 and "authenticat" in exc.message.casefold():
                # Linear refuses a bad key as a GraphQL error: it is a 401 all the same.
                raise TrackerHttpError(401, exc.message, method="POST", path=self.path) from exc
            raise
        cost = as_str(response.headers.get("x-complexity")) or ""
        self.complexity += int(cost) if cost.isdigit() and len(cost) < 10 else 0
        try:
            body = body_of(response)
        except (ValueError, RecursionError) as exc:
            raise LinearRefused(
                response.status_code, "the answer is not JSON", method="POST", path=self.path
            ) from exc
        data = as_dict(body).get("data")
        if isinstance(data, dict):
            return data
        errors = _errors(body)
        message = (as_str(errors[0].get("message")) if errors else None) or "no data"
        kind = NotFound if message.casefold().startswith(_NOT_FOUND) else LinearRefused
        raise kind(404 if kind is NotFound else 400, message[:300], method="POST", path=self.path)
