"""A small Jira Cloud REST (v3) client on the shared ``TrackerHttp``: the enhanced JQL
search (``/rest/api/3/search/jql``, ``nextPageToken`` pages), one issue, its remote
links, transitions, comments and writes. Basic auth (account email and API token) or an
OAuth bearer token; neither is ever logged.

Rate limits: Jira answers 429 with ``Retry-After`` (seconds) and ``X-RateLimit-Reset``
(an ISO 8601 time); a 503 may carry ``Retry-After`` too. ``X-RateLimit-NearLimit`` says
the budget is nearly spent: it is logged once per minute, never a reason to fail.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_ms, as_str
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import (
    RETRYABLE_STATUS,
    TrackerHttp,
    TrackerHttpError,
    backoff,
    retry_after,
)
from cotal_tasks.providers.hosted.paging import PageCap
from cotal_tasks.providers.hosted.tracker import IssueGone
from cotal_tasks.providers.jira.mapping import PROPERTY

log = logging.getLogger(__name__)

API = "rest/api/3"
SEARCH = f"{API}/search/jql"


def reset_wait(headers: Mapping[str, str], now_s: float) -> float | None:
    """``X-RateLimit-Reset`` (an ISO 8601 time) as seconds from ``now_s``."""
    reset = as_ms(headers.get("x-ratelimit-reset"))
    return max(1.0, reset / 1000 - now_s) if reset else None


class JiraRetry:
    """The ``RetryPolicy`` of one Jira endpoint."""

    def __init__(self) -> None:
        self.near_limit_at = 0.0  # when NearLimit was last logged

    def __call__(self, response: httpx.Response, attempt: int, now_s: float) -> float | None:
        headers = response.headers
        if headers.get("x-ratelimit-nearlimit") == "true" and now_s - self.near_limit_at > 60:
            self.near_limit_at = now_s
            log.warning("Jira says the rate limit is nearly spent (X-RateLimit-NearLimit)")
        return jira_wait(response.status_code, headers, attempt, now_s)


def jira_wait(status: int, headers: Mapping[str, str], attempt: int, now_s: float) -> float | None:
    """Seconds to wait before retrying an answer, or ``None``: never retried."""
    if status == 429:
        waited = retry_after(headers, now_s)
        if waited is None:
            waited = reset_wait(headers, now_s)
        return waited if waited is not None else 60.0 * 2.0 ** (attempt - 1)
    if status in RETRYABLE_STATUS:
        waited = retry_after(headers, now_s)
        return waited if waited is not None else backoff(attempt)
    return None  # 401, 403, 404, 400: refusals, never retried


def jira_http_client(
    site: str, token: str, timeout_s: float, *, email: str | None
) -> httpx.AsyncClient:
    if email is not None:
        pair = base64.b64encode(f"{email}:{token}".encode()).decode()
        authorization = f"Basic {pair}"
    else:
        authorization = f"Bearer {token}"
    return httpx.AsyncClient(
        base_url=site.rstrip("/") + "/",
        headers={
            "Authorization": authorization,
            "Accept": "application/json",
            "User-Agent": "cotal-tasks",
        },
        timeout=timeout_s,
    )


class JiraClient:
    def __init__(self, http: TrackerHttp, project: str, page_size: int = 100) -> None:
        self.http = http
        self.project = project
        self.page_size = page_size
        self.requests = 0  # every request sent, for the bench

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        self.requests += 1
        return await self.http.request(method, path, **kwargs)

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._call(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return body_of(response)

    async def search(
        self,
        jql: str,
        fields: Sequence[str],
        *,
        limit: int | None = None,
        properties: Sequence[str] = (),
        pages: int | None = None,
        cap: PageCap | None = None,
    ) -> AsyncIterator[Mapping[str, Any]]:
        """The pages of a JQL search, following ``nextPageToken`` until ``isLast``: the
        first ``pages`` only, when the caller wants no more; otherwise every page, up to
        the walk's ``cap`` (``max_pages``, its own unless the caller shares one between
        searches), past which the search ends with an error."""
        body: dict[str, Any] = {
            "jql": jql,
            "fields": list(fields),
            "maxResults": min(limit or self.page_size, self.page_size),
        }
        if properties:
            body["properties"] = list(properties)
        if pages is None and cap is None:
            cap = PageCap(self.http)
        asked = 0
        while pages is None or asked < pages:
            if cap is not None:
                cap.take(SEARCH, "POST")
            asked += 1
            page = as_dict(await self._json("POST", SEARCH, json=body))
            yield page
            token = as_str(page.get("nextPageToken"))
            if page.get("isLast") is not False or not token:
                return
            body = {**body, "nextPageToken": token}

    async def myself(self) -> Mapping[str, Any]:
        return as_dict(await self._json("GET", f"{API}/myself"))

    async def get_issue(self, key: str, fields: Sequence[str]) -> Mapping[str, Any] | None:
        """The issue, or ``None`` when Jira says there is none (404)."""
        try:
            found = await self._json(
                "GET", f"{API}/issue/{key}", params={"fields": ",".join(fields)}
            )
        except TrackerHttpError as exc:
            if exc.status == 404:
                return None
            raise
        return as_dict(found)

    async def read_issue(self, key: str, fields: Sequence[str]) -> Mapping[str, Any]:
        """The issue; ``IssueGone("deleted")`` when Jira answers 404 while the project
        reads (a token that lost access, or a wrong project, is an error)."""
        issue = await self.get_issue(key, fields)
        if issue is None:
            await self._call("GET", f"{API}/project/{self.project}")
            raise IssueGone("deleted")
        return issue

    async def remote_links(self, key: str) -> list[Any]:
        return as_list(await self._json("GET", f"{API}/issue/{key}/remotelink"))

    async def transitions(self, key: str) -> list[Any]:
        found = await self._json(
            "GET", f"{API}/issue/{key}/transitions", params={"expand": "transitions.fields"}
        )
        return as_list(as_dict(found).get("transitions"))

    async def transition(self, key: str, transition_id: str, fields: Mapping[str, Any]) -> None:
        body: dict[str, Any] = {"transition": {"id": transition_id}}
        if fields:
            body["fields"] = dict(fields)
        await self._call("POST", f"{API}/issue/{key}/transitions", json=body)

    async def assign(self, key: str, account: str | None) -> None:
        await self._call("PUT", f"{API}/issue/{key}/assignee", json={"accountId": account})

    async def edit(self, key: str, body: Mapping[str, Any]) -> None:
        await self._call("PUT", f"{API}/issue/{key}", json=dict(body))

    async def comment(self, key: str, document: Mapping[str, Any], mark: str | None) -> None:
        body: dict[str, Any] = {"body": dict(document)}
        if mark is not None:
            body["properties"] = [{"key": PROPERTY, "value": {"write": mark}}]
        await self._call("POST", f"{API}/issue/{key}/comment", json=body)

    async def recent_comments(self, key: str) -> list[Any]:
        found = await self._json(
            "GET",
            f"{API}/issue/{key}/comment",
            params={"orderBy": "-created", "maxResults": 100, "expand": "properties"},
        )
        return as_list(as_dict(found).get("comments"))

    async def create(self, fields: Mapping[str, Any], mark: str | None) -> Mapping[str, Any]:
        body: dict[str, Any] = {"fields": dict(fields)}
        if mark is not None:
            body["properties"] = [{"key": PROPERTY, "value": {"write": mark}}]
        return as_dict(await self._json("POST", f"{API}/issue", json=body))
