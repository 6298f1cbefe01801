"""A small GitLab REST (v4) client on ``httpx.AsyncClient``: project issues with keyset
pagination where the server offers it and offset pagination otherwise (never beyond the
offset limit), merge-request evidence, and writes. The base URL is configurable
(self-managed instances); the token comes from the environment and is never logged."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from cotal_tasks.providers.hosted.boundary import as_int, as_list
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import (
    RETRYABLE_STATUS,
    TrackerHttp,
    TrackerHttpError,
    backoff,
    retry_after,
)
from cotal_tasks.providers.hosted.paging import PageCap, Steps
from cotal_tasks.providers.hosted.tracker import IssueGone

PER_PAGE = 100


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
    """One project's endpoints, or (``kind="groups"``) a group's listings: the group's
    issue and merge-request listings take the same parameters, ``scope=all`` (every
    issue, not the token user's own) and offset pages only. ``filters`` are the scope's
    filters GitLab's issue listing takes (``GitLabConfig.listing_filters``): the listings
    that ask them pass ``scoped``."""

    def __init__(
        self,
        http: TrackerHttp,
        project: str,
        pagination: str = "auto",
        filters: Mapping[str, str] | None = None,
        *,
        kind: str = "projects",
    ) -> None:
        self.http = http
        self.project = project
        self.kind = kind
        # GitLab offers keyset pages for project issues only (18.3+), not a group's.
        self.pagination = "offset" if kind == "groups" else pagination
        self.every = {"scope": "all"} if kind == "groups" else {}
        self.filters = dict(filters or {})
        self._milestones: dict[str, int] | None = None  # title (casefolded) -> id
        self._users: dict[str, int] = {}
        self._paths: dict[int, str] = {}
        self._me: str | None = None

    def _path(self, tail: str = "") -> str:
        return f"{self.kind}/{quote(self.project, safe='')}{tail}"

    async def _listing(
        self, resource: str, since: str | None, extra: Mapping[str, str] | None = None
    ) -> AsyncIterator[httpx.Response]:
        """Pages ordered by ``updated_at`` ascending, updated at or after ``since``.

        Keyset pagination (GitLab 18.3+ for issues) goes on after the last (updated_at,
        id) read, so an edit during the walk cannot make it skip anything. Offset
        pagination can: an issue edited while the walk runs moves to the end and shifts
        every later one back a place. So over offset pages each next page asks from
        page 1 ``updated_after`` the last ``updated_at`` read (inclusive: the boundary
        comes again), which also keeps every request far from GitLab's offset limit;
        only a page that is one timestamp throughout is followed by its page number.
        However it pages, the walk reads at most ``max_pages`` pages (``PageCap``).
        ``extra``: further parameters of the listing (the scope's filters, a state).
        """
        params: dict[str, Any] = {
            "order_by": "updated_at",
            "sort": "asc",
            "per_page": PER_PAGE,
            **self.every,
        }
        if resource == "/issues":
            params["state"] = "all"
        params.update(extra or {})
        if since is not None:
            params["updated_after"] = since
        if self.pagination in ("auto", "keyset"):
            params["pagination"] = "keyset"
        url: str | None = self._path(resource)
        query: Mapping[str, Any] | None = params
        steps = Steps("iid")
        cap = PageCap(self.http)
        while url is not None:
            cap.take(self._path(resource))
            response = await self.http.request("GET", url, params=query)
            yield response
            if "x-page" not in response.headers and "x-next-page" not in response.headers:
                # Keyset pagination: follow the cursor link GitLab gives.
                next_url = response.links.get("next", {}).get("url")
                if next_url is None:
                    return
                url, query = next_url, None
                continue
            params.pop("pagination", None)  # the server answered with offset pagination
            next_page = response.headers.get("x-next-page")
            items = [i for i in as_list(body_of(response)) if isinstance(i, dict)]
            newest = steps.page(items, params.get("updated_after"))
            if next_page and steps.stepping:
                # A page of one timestamp: step through it by page number.
                url, query = self._path(resource), {**params, "page": next_page}
                continue
            after = newest if next_page and newest is not None else steps.restart()
            if after is None:
                return
            params["updated_after"] = after
            url, query = self._path(resource), dict(params)

    def issue_pages(
        self, since: str | None, *, scoped: bool = False, state: str = "all"
    ) -> AsyncIterator[httpx.Response]:
        """The issue listing since ``since``; ``scoped``: with the scope's filters."""
        extra = {**(self.filters if scoped else {}), "state": state}
        return self._listing("/issues", since, extra)

    def merge_request_pages(self, since: str | None) -> AsyncIterator[httpx.Response]:
        return self._listing("/merge_requests", since)

    async def _get(self, tail: str) -> Any:
        return (await self.http.request("GET", self._path(tail))).json()

    async def recent_issues(
        self, count: int, order: str = "updated_at", page: int = 1
    ) -> list[dict[str, Any]]:
        """The most recently updated (or ``created_at``) issues, newest first, one page
        (the ``page``-th)."""
        found: list[dict[str, Any]] = (
            await self.http.request(
                "GET",
                self._path("/issues"),
                params={
                    **self.every,
                    "state": "all",
                    "order_by": order,
                    "sort": "desc",
                    "per_page": count,
                    "page": page,
                },
            )
        ).json()
        return found

    async def get_issue(self, iid: int) -> dict[str, Any] | None:
        """The issue, or ``None`` when GitLab says there is none (404, 410)."""
        try:
            issue: dict[str, Any] = await self._get(f"/issues/{iid}")
        except TrackerHttpError as exc:
            if exc.status in (404, 410):
                return None
            raise
        return issue

    async def read_issue(self, iid: int) -> dict[str, Any]:
        """The issue; ``IssueGone("deleted")`` when GitLab answers 404 (or 410) while the
        project's issue listing reads: a token that lost access to the project, or a
        wrong ``project``, is an error, never a deletion. GitLab also answers 404 for a
        confidential issue the token may not see."""
        issue = await self.get_issue(iid)
        if issue is None:
            await self.http.request("GET", self._path("/issues"), params={"per_page": 1})
            raise IssueGone("deleted")
        return issue

    async def _every_page(self, tail: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Every item of a paginated list (GitLab's default page holds only 20), offset
        or keyset, whichever the server answers with. An answer that is not a list adds
        nothing (the caller's boundary records what it cannot read)."""
        found, _ = await self.every_page(tail, params)
        return found

    async def every_page(
        self, tail: str, params: Mapping[str, Any] | None = None
    ) -> tuple[list[Any], int]:
        """``_every_page`` and the number of requests it took (at most ``max_pages``)."""
        found: list[Any] = []
        first = {"per_page": PER_PAGE, **(params or {})}
        url: str | None = self._path(tail)
        query: Mapping[str, Any] | None = first
        requests = 0
        cap = PageCap(self.http)
        while url is not None:
            cap.take(self._path(tail))
            response = await self.http.request("GET", url, params=query)
            requests += 1
            found.extend(as_list(response.json()))
            next_page = response.headers.get("x-next-page")
            link = response.links.get("next", {}).get("url")
            if next_page:
                url, query = self._path(tail), {**first, "page": next_page}
            else:
                url, query = link, None
        return found, requests

    async def issue_notes(self, iid: int) -> list[Any]:
        """Every note on the issue, oldest first, all pages: the system notes among them
        say what mentioned it ("mentioned in commit …")."""
        return await self._every_page(
            f"/issues/{iid}/notes", {"sort": "asc", "order_by": "created_at"}
        )

    async def open_iids(self) -> tuple[set[int], int]:
        """The iids of the project's open issues, and the requests the listing took."""
        items, requests = await self.open_issues()
        return {i["iid"] for i in items if isinstance(i.get("iid"), int)}, requests

    async def open_issues(self) -> tuple[list[dict[str, Any]], int]:
        """The open issues (with the scope's filters), and the requests the listing took.
        GitLab's REST listing has no ids-only form; keyset pagination by id where the
        server offers it."""
        params: dict[str, Any] = {
            **self.every,
            "state": "opened",
            "order_by": "id",
            "sort": "asc",
            **self.filters,
        }
        if self.pagination in ("auto", "keyset"):
            params["pagination"] = "keyset"
        items, requests = await self.every_page("/issues", params)
        return [i for i in items if isinstance(i, dict)], requests

    async def related_merge_requests(self, iid: int) -> list[dict[str, Any]]:
        return await self._every_page(f"/issues/{iid}/related_merge_requests")

    async def closed_by(self, iid: int) -> list[dict[str, Any]]:
        return await self._every_page(f"/issues/{iid}/closed_by")

    async def merge_request(self, iid: int, project_id: int | None = None) -> dict[str, Any]:
        """A merge request of this project, or of ``project_id`` (a related merge request
        may live in another project)."""
        tail = f"/merge_requests/{iid}"
        path = self._path(tail) if project_id is None else f"projects/{project_id}{tail}"
        found: dict[str, Any] = (await self.http.request("GET", path)).json()
        return found

    async def project_path(self, project_id: int) -> str | None:
        """A project's ``path_with_namespace`` (a fork a merge request comes from)."""
        if project_id not in self._paths:
            try:
                response = await self.http.request("GET", f"projects/{project_id}")
            except TrackerHttpError:
                return None
            body = response.json()
            path = body.get("path_with_namespace") if isinstance(body, dict) else None
            self._paths[project_id] = path if isinstance(path, str) else ""
        return self._paths[project_id] or None

    async def group_path(self) -> str:
        """The group's full path (``GET /groups/:id``); the client is the group's."""
        body = (await self.http.request("GET", self._path())).json()
        path = body.get("full_path") if isinstance(body, dict) else None
        if not isinstance(path, str) or not path:
            raise TrackerHttpError(
                502, "GitLab did not say the group's full_path", method="GET", path=self._path()
            )
        return path

    async def archived(self, project_id: int) -> bool:
        """Whether a project is archived (``GET /projects/:id``)."""
        body = (await self.http.request("GET", f"projects/{project_id}")).json()
        return isinstance(body, dict) and body.get("archived") is True

    async def milestone_id(self, title: str) -> int | None:
        """The id of the project's milestone titled ``title`` (any state, case-insensitive),
        read once; ``None`` when there is none."""
        if self._milestones is None:
            items, _ = await self.every_page("/milestones", {"state": "all"})
            self._milestones = {
                str(item["title"]).casefold(): number
                for item in items
                if isinstance(item, dict) and isinstance(item.get("title"), str)
                if (number := as_int(item.get("id"))) is not None
            }
        return self._milestones.get(title.casefold())

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

    async def own_username(self) -> str | None:
        """The username the token acts as (``GET /user``), or ``None`` when GitLab does
        not say. A refusal (401, 403, 404) is not remembered: a token rotated or given
        ``read_user`` later answers at the next write, so one refusal never turns the
        assignee check off until a restart."""
        if self._me is None:
            try:
                body = (await self.http.request("GET", "user")).json()
            except TrackerHttpError as exc:
                if exc.status not in (401, 403, 404):
                    raise  # not a refusal: the caller logs it, and asks again next time
                return None  # refused this time: asked again at the next write
            name = body.get("username") if isinstance(body, dict) else None
            self._me = name if isinstance(name, str) else ""
        return self._me or None

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
