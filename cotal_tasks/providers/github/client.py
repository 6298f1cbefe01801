"""A small GitHub REST client on ``httpx.AsyncClient``: only the endpoints the provider
needs, with GitHub's rate-limit rules. The API base URL is configurable (GitHub
Enterprise Server, tests); the token comes from the environment and is never logged."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from cotal_tasks.providers.github import events, graphql
from cotal_tasks.providers.github.events import EventsRead
from cotal_tasks.providers.github.mapping import is_pull_request
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_list, as_ms
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import (
    RETRYABLE_STATUS,
    TrackerHttp,
    TrackerHttpError,
    backoff,
    message_of,
    retry_after,
)
from cotal_tasks.providers.hosted.paging import PageCap, Steps
from cotal_tasks.providers.hosted.tracker import IssueGone

PER_PAGE = 100
PROJECT_STATUS_QUERY = """
query($ids: [ID!]!) {
  nodes(ids: $ids) {
    ... on Issue {
      number
      projectItems(first: 10) {
        nodes { fieldValueByName(name: "Status") {
          ... on ProjectV2ItemFieldSingleSelectValue { name } } }
      }
    }
  }
}
"""
ISSUE_OF_NODE_QUERY = """
query($id: ID!) {
  node(id: $id) { ... on Issue { number repository { nameWithOwner } } }
}
"""
API_VERSION = "2022-11-28"
GONE = {301: "transferred", 410: "deleted"}  # what GitHub's answer for one issue says


def github_retry(response: httpx.Response, attempt: int, now_s: float) -> float | None:
    """Seconds to wait before retrying ``response``, or ``None``: never a plain refusal."""
    status = response.status_code
    if status in RETRYABLE_STATUS:
        return backoff(attempt)
    if status not in (403, 429):
        return None
    headers = response.headers
    waited = retry_after(headers, now_s)
    if waited is not None:
        return waited
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        return max(1.0, float(headers["x-ratelimit-reset"]) - now_s + 1)
    if status == 429 or "rate limit" in message_of(response).lower():
        return 60.0 * 2.0 ** (attempt - 1)  # a secondary limit without a hint: a minute, then more
    return None  # a 403 that is not a rate limit is a permission refusal


def github_http_client(api_url: str, token: str, timeout_s: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=api_url.rstrip("/") + "/",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "cotal-tasks",
        },
        timeout=timeout_s,
    )


class GitHubClient:
    """One repository's endpoints. ``filters`` are the scope's filters GitHub's issue
    listing takes (``labels``, ``type``, ``assignee``): every listing asks them."""

    def __init__(
        self, http: TrackerHttp, repository: str, filters: Mapping[str, str] | None = None
    ) -> None:
        self.http = http
        self.repo = repository
        self.filters = dict(filters or {})
        self._milestones: dict[str, int] | None = None  # title (casefolded) -> number

    def _path(self, tail: str = "") -> str:
        return f"repos/{self.repo}{tail}"

    async def issue_pages(
        self, since: str | None, etag: tuple[str, str] | None, state: str = "all"
    ) -> AsyncIterator[httpx.Response]:
        """Pages of ``state=all`` issues (and pull requests) updated since, oldest first.

        With ``etag`` (the URL and ETag of the last page of an earlier listing, recorded
        when that page had room to spare), a conditional request for that page comes
        first: any change sorts to the end of an ascending listing, so it would have to
        change that page, and a 304 proves nothing changed (and is yielded, ending the
        listing). A 200 is that page as it is now: a listing from its own ``since``, so
        when it asks what this walk asks from a ``since`` no later than this walk's, it
        is the walk's first page and the walk goes on from it (a changed poll costs the
        pages its changes fill, not one more). Otherwise the listing starts from the
        first page.

        The walk never follows page numbers past a page it has read: an issue edited
        while the walk runs moves to the end and shifts every later one back a place,
        so page N+1 would skip one issue for each. Each next page instead asks
        ``since`` the last ``updated_at`` read (inclusive: the boundary issues come
        again); only a page that is one timestamp throughout, which ``since`` cannot
        step past, is followed by its page number. Should an issue read there come
        again later with a newer ``updated_at`` (edited meanwhile, so the rest of that
        timestamp shifted back a place), the walk ends by reading from that timestamp
        once more. The walk, steps and restarts alike, reads at most ``max_pages`` pages
        (``PageCap``): a listing that names a next page forever ends with an error.
        """
        steps = Steps("number")
        cap = PageCap(self.http)
        url: str | None = self._listing_url(since, state)
        response: httpx.Response | None = None
        if etag is not None:
            probe = await self.http.request("GET", etag[0], headers={"If-None-Match": etag[1]})
            if probe.status_code == 304:
                yield probe
                return
            probed = httpx.URL(etag[0]).params.get("since")
            earlier = probed is None or (since is not None and as_ms(probed) <= as_ms(since))
            if earlier and etag[0] == self._listing_url(probed, state):
                cap.take(self._path("/issues"))
                since, response = probed, probe  # the walk's listing, from before: page 1
        while url is not None:
            if response is None:
                cap.take(self._path("/issues"))
                response = await self.http.request("GET", url)
            yield response
            following = response.links.get("next", {}).get("url")
            last = steps.page([i for i in as_list(body_of(response)) if isinstance(i, dict)], since)
            if following is not None and steps.stepping:
                url = following  # a page of one timestamp: step through it by number
            elif following is not None and last is not None:
                since = last
                url = self._listing_url(since, state)
            else:
                since = steps.restart()
                url = self._listing_url(since, state) if since is not None else None
            response = None

    def _listing_url(self, since: str | None, state: str = "all") -> str:
        params: dict[str, Any] = {
            "state": state,
            "sort": "updated",
            "direction": "asc",
            "per_page": PER_PAGE,
            **self.filters,
        }
        if since is not None:
            params["since"] = since
        return str(self.http.client.build_request("GET", self._path("/issues"), params=params).url)

    async def recent_issues(
        self, count: int, order: str = "updated", page: int = 1
    ) -> list[dict[str, Any]]:
        """The most recently updated (or ``created``) issues and pull requests, newest
        first, one page (the ``page``-th)."""
        response = await self.http.request(
            "GET",
            self._path("/issues"),
            params={
                "state": "all",
                "sort": order,
                "direction": "desc",
                "per_page": count,
                "page": page,
            },
        )
        items: list[dict[str, Any]] = response.json()
        return items

    async def get_issue(self, number: int) -> dict[str, Any]:
        """The issue (its JSON as GitHub sent it: the caller's boundary checks its shape);
        ``IssueGone`` when it was deleted (410, or a 404 while the repository's issue
        listing reads: a token that lost access, or a wrong ``repository``, is an error,
        never a deletion) or transferred (301)."""
        try:
            response = await self.http.request("GET", self._path(f"/issues/{number}"))
        except TrackerHttpError as exc:
            if exc.status == 404:
                await self.http.request("GET", self._path("/issues"), params={"per_page": 1})
                raise IssueGone("deleted") from exc
            if exc.status == 301:
                await self._repository_in_place()
            if exc.status in GONE:
                raise IssueGone(GONE[exc.status]) from exc
            raise
        body: dict[str, Any] = response.json()
        return body

    async def referenced_since(
        self, seen: int | None, etag: str | None, scoped: bool = False
    ) -> EventsRead:
        """The repository's issue events feed since event ``seen`` (``events.read``)."""
        return await events.read(self.http, self._path("/issues/events"), seen, etag, scoped)

    async def _repository_in_place(self) -> None:
        """Tell a transferred issue from a renamed repository: both answer 301 for the
        issue, but only a renamed (or transferred) repository answers 301 for itself."""
        try:
            await self.http.request("GET", self._path())
        except TrackerHttpError as exc:
            if exc.status == 301:
                raise TrackerHttpError(
                    301,
                    f"the repository {self.repo} was renamed or moved; name it anew in "
                    "`repository` or `repositories` (an organization or installation "
                    "endpoint takes its new name at the next discovery)",
                    method="GET",
                    path=exc.path,
                ) from exc
            raise

    async def _every_page(self, tail: str) -> list[dict[str, Any]]:
        """Every item of a paginated listing, following the ``Link`` header."""
        items, _ = await self.every_page(tail)
        return items

    async def every_page(
        self, tail: str, params: Mapping[str, Any] | None = None
    ) -> tuple[list[Any], int]:
        """``_every_page`` with ``params``, and the number of requests it took."""
        items: list[Any] = []
        url: str | None = self._path(tail)
        query: Mapping[str, Any] | None = {"per_page": PER_PAGE, **(params or {})}
        requests = 0
        while url is not None:
            response = await self.http.request("GET", url, params=query)
            requests += 1
            items.extend(as_list(response.json()))
            url = response.links.get("next", {}).get("url")
            query = None
        return items, requests

    async def open_numbers(self) -> tuple[set[int], int]:
        """The numbers of the open issues (pull requests, which the listing carries too,
        left out) and the requests it took. The REST listing has no ids-only form."""
        items, requests = await self.every_page("/issues", {"state": "open", **self.filters})
        numbers = {
            item["number"]
            for item in items
            if isinstance(item, dict)
            and isinstance(item.get("number"), int)
            and not is_pull_request(item)
        }
        return numbers, requests

    async def labelled_numbers(self, name: str, most: int) -> set[int] | None:
        """The issues (any state, pull requests left out) carrying label ``name``;
        ``None`` when the listing holds more than ``most`` items (at most ``most + 1``
        are read)."""
        numbers: set[int] = set()
        url: str | None = self._path("/issues")
        query: Mapping[str, Any] | None = {
            "labels": name,
            "state": "all",
            "per_page": min(PER_PAGE, most + 1),
        }
        seen = 0
        while url is not None:
            response = await self.http.request("GET", url, params=query)
            items = as_list(response.json())
            seen += len(items)
            if seen > most:
                return None
            numbers |= {
                number
                for item in items
                if isinstance(item, dict) and not is_pull_request(item)
                if (number := as_int(item.get("number")))
            }
            url, query = response.links.get("next", {}).get("url"), None
        return numbers

    async def issue_of_node(self, url: str, node: str) -> tuple[str, int] | None:
        """The repository (``owner/name``) and number of the issue with node id ``node``;
        ``None`` when it is no issue (a pull request, a draft, a node not there)."""
        data = await self.graphql(url, ISSUE_OF_NODE_QUERY, {"id": node})
        found = as_dict(as_dict(data).get("node"))
        number = as_int(found.get("number"))
        repository = as_dict(found.get("repository")).get("nameWithOwner")
        if number is None or not isinstance(repository, str):
            return None
        return repository, number

    async def graphql(self, url: str, query: str, variables: Mapping[str, Any]) -> Any:
        """The ``data`` of a GraphQL answer (``graphql.query``): ``RateLimited``,
        ``GraphQLUnavailable`` or ``GraphQLRefused`` otherwise."""
        return await graphql.query(self.http, url, query, variables)

    async def milestone_number(self, title: str) -> int | None:
        """The number of the repository's milestone titled ``title`` (any state,
        case-insensitive), read once; ``None`` when there is none."""
        if self._milestones is None:
            items, _ = await self.every_page("/milestones", {"state": "all"})
            self._milestones = {
                str(item["title"]).casefold(): number
                for item in items
                if isinstance(item, dict) and isinstance(item.get("title"), str)
                if (number := as_int(item.get("number"))) is not None
            }
        return self._milestones.get(title.casefold())

    async def create_issue(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.http.request("POST", self._path("/issues"), json=dict(payload))
        body: dict[str, Any] = response.json()
        return body

    async def update_issue(self, number: int, payload: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.http.request(
            "PATCH", self._path(f"/issues/{number}"), json=dict(payload)
        )
        body: dict[str, Any] = response.json()
        return body

    async def add_assignees(self, number: int, logins: list[str]) -> dict[str, Any]:
        response = await self.http.request(
            "POST", self._path(f"/issues/{number}/assignees"), json={"assignees": logins}
        )
        body: dict[str, Any] = response.json()
        return body

    async def remove_assignees(self, number: int, logins: list[str]) -> None:
        await self.http.request(
            "DELETE", self._path(f"/issues/{number}/assignees"), json={"assignees": logins}
        )

    async def add_labels(self, number: int, labels: list[str]) -> None:
        await self.http.request(
            "POST", self._path(f"/issues/{number}/labels"), json={"labels": labels}
        )

    async def remove_label(self, number: int, label: str) -> None:
        try:
            await self.http.request(
                "DELETE", self._path(f"/issues/{number}/labels/{quote(label, safe='')}")
            )
        except TrackerHttpError as exc:
            if exc.status != 404:  # the label was not on the issue: nothing to remove
                raise

    async def project_statuses(self, url: str, node_ids: list[str]) -> dict[int, str]:
        """Issue number → Projects v2 "Status" name, one GraphQL request for all ids."""
        if not node_ids:
            return {}
        data = await self.graphql(url, PROJECT_STATUS_QUERY, {"ids": node_ids})
        statuses: dict[int, str] = {}
        for node in as_list(as_dict(data).get("nodes")):
            node = as_dict(node)
            if as_int(node.get("number")) is None:
                continue
            for item in as_list(as_dict(node.get("projectItems")).get("nodes")):
                name = as_dict(as_dict(item).get("fieldValueByName")).get("name")
                if isinstance(name, str) and name:
                    statuses[int(node["number"])] = name
                    break
        return statuses

    async def comments(self, number: int) -> list[dict[str, Any]]:
        """Every comment on the issue, oldest first."""
        return await self._every_page(f"/issues/{number}/comments")

    async def comment(self, number: int, body: str) -> None:
        await self.http.request(
            "POST", self._path(f"/issues/{number}/comments"), json={"body": body}
        )
