"""A small GitLab REST (v4) client on ``httpx.AsyncClient``: project issues with keyset
pagination where the server offers it and offset pagination otherwise (never beyond the
offset limit), merge-request evidence, and writes. The base URL is configurable
(self-managed instances); the token comes from the environment and is never logged."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from cotal_tasks.providers.hosted.http import (
    RETRYABLE_STATUS,
    TrackerHttp,
    TrackerHttpError,
    backoff,
    retry_after,
)

PER_PAGE = 100
# Restart an offset listing from the advanced cursor well before GitLab's offset limit
# (50,000 records on gitlab.com), so no request ever goes past it.
OFFSET_RESTART_PAGES = 100


def gitlab_retry(response: httpx.Response, attempt: int, now_s: float) -> float | None:
    status = response.status_code
    if status in RETRYABLE_STATUS:
        return backoff(attempt)
    if status != 429:
        return None  # GitLab's 403 is a permission refusal, never a rate limit
    waited = retry_after(response.headers, now_s)
    if waited is not None:
        return waited
    reset = response.headers.get("ratelimit-reset")
    if reset and reset.isdigit():
        return max(1.0, float(reset) - now_s + 1)
    return 60.0 * 2.0 ** (attempt - 1)


def gitlab_http_client(api_url: str, token: str, timeout_s: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api_url.rstrip("/") + "/",
        headers={"PRIVATE-TOKEN": token, "User-Agent": "cotal-tasks"},
        timeout=timeout_s,
    )


class GitLabClient:
    def __init__(self, http: TrackerHttp, project: str, pagination: str = "auto") -> None:
        self.http = http
        self.project = project
        self.pagination = pagination
        self._users: dict[str, int] = {}

    def _path(self, tail: str = "") -> str:
        return f"projects/{quote(self.project, safe='')}{tail}"

    async def _listing(self, resource: str, since: str | None) -> AsyncIterator[httpx.Response]:
        """Pages ordered by ``updated_at`` ascending, updated at or after ``since``."""
        params: dict[str, Any] = {"order_by": "updated_at", "sort": "asc", "per_page": PER_PAGE}
        if resource == "/issues":
            params["state"] = "all"
        if since is not None:
            params["updated_after"] = since
        if self.pagination in ("auto", "keyset"):
            params["pagination"] = "keyset"
        url: str | None = self._path(resource)
        query: Mapping[str, Any] | None = params
        pages = 0
        while url is not None:
            response = await self.http.request("GET", url, params=query)
            yield response
            pages += 1
            if "x-page" not in response.headers and "x-next-page" not in response.headers:
                # Keyset pagination: follow the cursor link GitLab gives.
                next_url = response.links.get("next", {}).get("url")
                if next_url is None:
                    return
                url, query = next_url, None
                continue
            next_page = response.headers.get("x-next-page")
            if not next_page:
                return
            params.pop("pagination", None)  # the server answered with offset pagination
            items = response.json()
            newest = items[-1].get("updated_at") if items else None
            if pages >= OFFSET_RESTART_PAGES and newest and newest != params.get("updated_after"):
                # Start over from the newest timestamp read (the caller skips what it has
                # seen), so no request ever goes deep enough to meet the offset limit.
                params["updated_after"] = newest
                pages = 0
                url, query = self._path(resource), dict(params)
                continue
            url, query = self._path(resource), {**params, "page": next_page}

    def issue_pages(self, since: str | None) -> AsyncIterator[httpx.Response]:
        return self._listing("/issues", since)

    def merge_request_pages(self, since: str | None) -> AsyncIterator[httpx.Response]:
        return self._listing("/merge_requests", since)

    async def _get(self, tail: str) -> Any:
        return (await self.http.request("GET", self._path(tail))).json()

    async def recent_issues(self, count: int, order: str = "updated_at") -> list[dict[str, Any]]:
        """The most recently updated (or ``created_at``) issues, newest first, one page."""
        found: list[dict[str, Any]] = (
            await self.http.request(
                "GET",
                self._path("/issues"),
                params={
                    "state": "all",
                    "order_by": order,
                    "sort": "desc",
                    "per_page": count,
                },
            )
        ).json()
        return found

    async def get_issue(self, iid: int) -> dict[str, Any] | None:
        try:
            issue: dict[str, Any] = await self._get(f"/issues/{iid}")
        except TrackerHttpError as exc:
            if exc.status in (404, 410):
                return None
            raise
        return issue

    async def related_merge_requests(self, iid: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._get(f"/issues/{iid}/related_merge_requests")
        return found

    async def closed_by(self, iid: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._get(f"/issues/{iid}/closed_by")
        return found

    async def merge_request(self, iid: int) -> dict[str, Any]:
        found: dict[str, Any] = await self._get(f"/merge_requests/{iid}")
        return found

    async def create_issue(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.http.request("POST", self._path("/issues"), json=dict(payload))
        issue: dict[str, Any] = response.json()
        return issue

    async def update_issue(self, iid: int, payload: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.http.request("PUT", self._path(f"/issues/{iid}"), json=dict(payload))
        issue: dict[str, Any] = response.json()
        return issue

    async def recent_notes(self, iid: int) -> list[dict[str, Any]]:
        """The newest notes on the issue, newest first (one page)."""
        response = await self.http.request(
            "GET",
            self._path(f"/issues/{iid}/notes"),
            params={"sort": "desc", "order_by": "created_at", "per_page": PER_PAGE},
        )
        found: list[dict[str, Any]] = response.json()
        return found

    async def note(self, iid: int, body: str) -> None:
        await self.http.request("POST", self._path(f"/issues/{iid}/notes"), json={"body": body})

    async def user_id(self, username: str) -> int:
        if username not in self._users:
            response = await self.http.request("GET", "users", params={"username": username})
            found = response.json()
            if not found:
                raise TrackerHttpError(
                    404, f"no GitLab user {username!r}", method="GET", path="/users"
                )
            self._users[username] = int(found[0]["id"])
        return self._users[username]
