"""GitHub as a ``Tracker``: list, fetch with evidence, create, and apply planned writes."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import httpx

from cotal_tasks.providers.github import cadence, evidence, mapping, sweep
from cotal_tasks.providers.github.client import PER_PAGE, GitHubClient
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.github.graphql import GraphQLRefused, GraphQLUnavailable
from cotal_tasks.providers.github.steps import write_steps
from cotal_tasks.providers.github.walk import EDGE, Walk
from cotal_tasks.providers.hosted.boundary import ItemBoundary, as_int
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttpError
from cotal_tasks.providers.hosted.scope import HORIZON
from cotal_tasks.providers.hosted.tracker import (
    MARKED_PAGES,
    MOVED,
    PRESENT,
    IssueGone,
    ListPage,
    NewIssue,
    Order,
    Step,
    TrackedIssue,
    Tracker,
    TrackerChange,
)
from cotal_tasks.providers.hosted.writeback import mark_in

log = logging.getLogger(__name__)

ETAG = "etag"  # the checkpoint's (URL, ETag) of the last listing page
OPEN_PHASE = "open"  # an import's listing of the open issues, before the horizon's
MARKS = "marks"  # the checkpoint's marks of the issue events feed:
EVENTS_MARK = "issue_events"  # the newest issue event read
EVENTS_ETAG = "issue_events_etag"  # the ETag of the issue events feed's first page


def _iso(stamp: datetime) -> str:
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GitHubTracker(Tracker):
    """GitHub keeps up to ten assignees per issue (``single_assignee`` is false); a
    repository's stable id comes from deliveries, kept beside the mirror."""

    name = "GitHub"

    def __init__(
        self,
        client: GitHubClient,
        config: GitHubConfig,
        boundary: ItemBoundary,
        repo: str | None = None,  # default: the first repository
    ) -> None:
        repo = repo or config.location
        super().__init__(boundary, path=repo, mutation_spacing_s=config.mutation_spacing_s)
        client.filters = config.listing_filters()
        self.client = client
        self.config = config
        self.repo = repo
        self._owed: set[int] = set()  # issues whose evidence GraphQL did not answer for

    def sibling(self, source: str) -> Self:
        if source == self.repo:
            return self
        client = GitHubClient(self.client.http, source)
        return type(self)(client, self.config, self.boundary, source)

    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        """The issue listing, then the issues commits referenced (the issue events feed).
        ``remembered["etag"]`` is the (URL, ETag) of the last poll's last page, for a
        conditional request; ``remembered["marks"]`` where the events feed was left;
        ``remembered[MOVED]`` the last webhook's word that the repository moved;
        ``remembered[PRESENT]`` that the poll is to reach the present (the feed is read
        whatever its cadence)."""
        marks: dict[str, str] = dict(remembered.get(MARKS) or {})
        moved = remembered.get(MOVED)
        moved = moved if isinstance(moved, str) else None
        present = remembered.get(PRESENT) is True
        saved_etag = remembered.get(ETAG)
        etag = (saved_etag[0], saved_etag[1]) if saved_etag else None
        since = None
        if cursor is not None:
            at = datetime.fromisoformat(cursor.replace("Z", "+00:00"))
            since = _iso(at - timedelta(seconds=self.config.overlap_s))
        first = True
        edge = remembered.get(EDGE)
        walk = Walk(
            self.repo,
            cursor,
            self._links,
            self._project_statuses,
            self._tracked,
            self.boundary,
            edge=edge if isinstance(edge, dict) else {},
        )
        horizon = remembered.get(HORIZON)
        async for response, phase in self._listings(since, etag, horizon):
            if response.status_code == 304:
                if referenced := await self._referenced(marks, set(), False, moved, present):
                    yield referenced
                if swept := await self._swept(remembered.get(sweep.SWEEP)):
                    yield swept
                if self._owed:
                    yield ListPage((), pages=0, owed=self._take_owed())
                yield ListPage((), not_modified=True)
                return
            raw = self.boundary.page(body_of(response), "the issue listing")
            read = await walk.page(raw)
            page_etag = None
            # A page with room to spare is the last one: remember its ETag, so the next
            # poll can learn with one conditional request that nothing changed.
            if (
                phase != OPEN_PHASE
                and len(raw) < PER_PAGE
                and "next" not in response.links
                and response.headers.get("etag")
            ):
                page_etag = (str(response.request.url), response.headers["etag"])
            total = _last_page(response) if first else None
            first = False
            yield ListPage(
                read.issues,
                frozenset(read.linked),
                read.highest if phase != OPEN_PHASE else None,
                total_pages=total,
                remember={
                    EDGE: dict(walk.edge_now),
                    **({ETAG: list(page_etag)} if page_etag else {}),
                },
                evidenced=frozenset(read.evidenced),
                fetched=read.reread,  # earlier pages' issues, read again for evidence
                owed=self._take_owed(),
            )
        if referenced := await self._referenced(marks, set(walk.as_of), True, moved, present):
            yield referenced
        if swept := await self._swept(remembered.get(sweep.SWEEP)):
            yield swept
        if self._owed:
            yield ListPage((), pages=0, owed=self._take_owed())

    async def _listings(
        self, since: str | None, etag: tuple[str, str] | None, horizon: Any
    ) -> AsyncIterator[tuple[httpx.Response, str]]:
        """The listing pages of one poll, each with its phase. With an import horizon, an
        import (no cursor yet) reads the open issues, then every issue changed since the
        horizon (open or closed): closed issues older than it are never listed. The open
        issues' pages move no cursor: an interrupted import starts over from the
        horizon's listing, which the open issues changed since also fall in."""
        if since is None and etag is None and isinstance(horizon, int):
            async for response in self.client.issue_pages(None, None, state="open"):
                yield response, OPEN_PHASE
            since = _iso(datetime.fromtimestamp(horizon / 1000, UTC))
        async for response in self.client.issue_pages(since, etag):
            yield response, "all"

    def _take_owed(self) -> frozenset[int]:
        owed, self._owed = frozenset(self._owed), set()
        return owed

    async def open_numbers(self) -> tuple[set[int], int]:
        return await self.client.open_numbers()

    async def _referenced(
        self,
        marks: Mapping[str, str],
        read: set[int],
        changed: bool,
        moved: str | None,
        present: bool,
    ) -> ListPage | None:
        """After the walk, when ``cadence`` says the feed is due (``changed``: the
        listing was not 304; ``moved``: the last webhook's mark), or whatever it says in a
        poll to the present (``present``: the CLI's ``sync``): the issues commits
        referenced since the feed was last read (a commit reference may move neither the
        issue's ``updated_at`` nor any listing, so the walk need not see it), each read
        with its evidence, ``BATCH`` to a GraphQL request, except those whose evidence
        the walk ``read``. ``None`` when the feed is left unread and nothing is owed."""
        scoped = bool(self.config.scope.keys() - {"horizon_days"})
        if not self.config.reference_events:
            return None
        now = self.client.http.clock_s()
        clock = cadence.clock(marks)
        asked = clock.asked(changed, moved)
        if not present and not clock.due(now, self.config.reference_events_interval_s, asked):
            if not asked or clock.owed:
                return None
            return ListPage((), pages=0, remember={MARKS: {**marks, **clock.held(moved)}})
        seen = marks.get(EVENTS_MARK)
        found = await self.client.referenced_since(
            int(seen) if seen and seen.isdigit() else None, marks.get(EVENTS_ETAG), scoped
        )
        mark = clock.read(now, found.wait_s, moved)
        if found.not_modified:
            return ListPage((), pages=0, remember={MARKS: {**marks, **mark}})
        if found.newest is not None:
            mark[EVENTS_MARK] = str(found.newest)
        if found.etag:
            mark[EVENTS_ETAG] = found.etag
        numbers = sorted(found.referenced - read)
        issues = await self._fetch_many(numbers)
        return ListPage(
            issues,
            pages=0,
            remember={MARKS: {**marks, **mark}},
            evidenced=frozenset(numbers),
            fetched=len(issues),
            rescoped=found.rescoped - set(numbers),
        )

    async def _swept(self, saved: Any) -> ListPage | None:
        """After the walk and the feed, the rotating reference sweep (``sweep``): one
        GraphQL request for the next page of open issues and their link counts; each issue
        whose count moved is read with its evidence. ``None`` when the sweep is off. An
        answer that does not read is counted by the boundary and leaves the state as it
        was; a refused query starts the next lap from the first page."""
        if not self.config.reference_sweep:
            return None
        state = sweep.SweepState.load(saved)
        owner, name = self.repo.split("/", 1)
        variables = {"owner": owner, "name": name, "after": state.after}
        try:
            data = await self.client.graphql(self.config.graphql_endpoint(), sweep.QUERY, variables)
        except GraphQLUnavailable as exc:
            self.boundary.down("GraphQL", "the reference sweep", str(exc))
            return None  # the lap goes on where it was once GraphQL answers
        except GraphQLRefused as exc:
            # An older server, or a cursor it no longer takes: the sweep starts over.
            self.boundary.note("evidence-refused", "the reference sweep", str(exc))
            state.after = None
            return ListPage((), pages=0, remember={sweep.SWEEP: state.dump()})
        page = self.boundary.map("the reference sweep", sweep.read, data, reason="evidence-refused")
        if page is None:
            return None
        if page.odd:
            self.boundary.note("evidence-refused", "the reference sweep", f"{page.odd} odd nodes")
        state, numbers = sweep.advance(state, page)
        issues = await self._fetch_many(numbers)
        return ListPage(
            issues,
            pages=0,
            remember={sweep.SWEEP: state.dump()},
            evidenced=frozenset(numbers),
            fetched=len(issues),
        )

    async def _fetch_many(self, numbers: list[int]) -> list[TrackedIssue]:
        """``fetch`` of several issues, their evidence read together. One that cannot be
        read (other than a rate limit) is counted and left for a later read."""
        items: dict[int, dict[str, Any]] = {}
        issues: list[TrackedIssue] = []
        for number in numbers:
            try:
                item = await self.client.get_issue(number)
            except IssueGone as exc:
                issues.append(mapping.gone(self.repo, number, exc.fate))
                continue
            except RateLimited:
                raise
            except TrackerHttpError as exc:
                self.boundary.note("issue-unreadable", f"issue {number}", str(exc))
                continue
            if isinstance(item, dict) and not mapping.is_pull_request(item):
                items[number] = item
        found = await self._links(sorted(items), [])
        statuses = await self._project_statuses(list(items.values()))
        for number, item in items.items():
            evidence_of = found.evidence.get(number, ())
            if issue := self._tracked(item, evidence_of, statuses.get(number)):
                issues.append(issue)
        return issues

    async def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        for page in range(1, MARKED_PAGES + 1):  # no reader needs more
            items = await self.client.recent_issues(PER_PAGE, order=order, page=page)
            yield [
                issue
                for item in items
                if isinstance(item, dict) and not mapping.is_pull_request(item)
                if (issue := self._tracked(item))
            ]
            if len(items) < PER_PAGE:
                return

    def _tracked(
        self, item: dict[str, Any], found: Any = (), status: str | None = None
    ) -> TrackedIssue | None:
        """One issue through the boundary: mapped, or recorded as unmappable."""
        ref = f"issue {as_int(item.get('number'))}"
        return self.boundary.map(ref, mapping.tracked, self.repo, item, found, status)

    async def fetch(self, number: int) -> TrackedIssue | None:
        try:
            item = await self.client.get_issue(number)
        except IssueGone as exc:
            return mapping.gone(self.repo, number, exc.fate)
        if not isinstance(item, dict) or mapping.is_pull_request(item):
            return None
        found = await self._links([number], [])
        statuses = await self._project_statuses([item])
        tracked = self._tracked(item, found.evidence.get(number, ()), statuses.get(number))
        if tracked is not None and number in self._owed:
            self._owed.discard(number)
            tracked = replace(tracked, evidence_unread=True)
        return tracked

    async def _links(self, issues: list[int], pulls: list[int]) -> evidence.Found:
        """Evidence of ``issues`` and the issues ``pulls`` name, ``BATCH`` per request;
        an issue with more links than the record keeps reads older pages only until
        it has enough. An answer that does not read is recorded by the boundary: those
        issues are mirrored without these links."""
        found = evidence.Found()
        asks = [evidence.Ask(n) for n in issues] + [evidence.Ask(n, pull=True) for n in pulls]
        owner, name = self.repo.split("/", 1)
        url = self.config.graphql_endpoint()
        while asks:
            batch, asks = asks[: evidence.BATCH], asks[evidence.BATCH :]
            document, variables = evidence.query(batch)
            try:
                data = await self.client.graphql(
                    url, document, {"owner": owner, "name": name, **variables}
                )
            except GraphQLUnavailable as exc:
                # GraphQL down (a wrong graphql_url, a server without it, an outage, a
                # transient error past its retries): the REST mirror goes on, these
                # issues' evidence is owed and read again once GraphQL answers.
                self.boundary.down("GraphQL", f"links of {len(issues)} issue(s)", str(exc))
                self._owed.update(issues)
                return found
            except GraphQLRefused as exc:
                # A server that takes no such query (an older GitHub Enterprise Server)
                # must not stop the sync: the issues are mirrored without these links.
                log.warning("%s: evidence not readable (%s); mirrored without it", self.repo, exc)
                return found
            self.boundary.up("GraphQL")
            ref = f"links of {', '.join(str(ask.number) for ask in batch[:3])}"
            refused = self.boundary.note
            self.boundary.map(
                ref,
                evidence.read,
                self.repo,
                batch,
                data,
                found,
                refused,
                reason="evidence-refused",
            )
            asks += [evidence.Ask(n, before=c) for n, c in found.older.items()]
            found.older.clear()
        return found

    async def _project_statuses(self, items: list[dict[str, Any]]) -> dict[int, str]:
        if not self.config.project_status:
            return {}
        ids = [str(item["node_id"]) for item in items if item.get("node_id")]
        try:
            return await self.client.project_statuses(self.config.graphql_endpoint(), ids)
        except (GraphQLUnavailable, GraphQLRefused) as exc:
            # The status is evidence of a kind: the issues map without it this time.
            self.boundary.down("GraphQL", f"project status of {len(ids)} issue(s)", str(exc))
            self._owed.update(n for item in items if (n := as_int(item.get("number"))))
            return {}

    async def create(self, issue: NewIssue) -> TrackedIssue:
        payload: dict[str, Any] = {"title": issue.title}
        if issue.body is not None:
            payload["body"] = issue.body
        if issue.labels:
            payload["labels"] = list(issue.labels)
        if issue.assignees:
            payload["assignees"] = list(issue.assignees)
        if issue.issue_type:
            payload["type"] = issue.issue_type
        if issue.milestone:
            number = await self.client.milestone_number(issue.milestone)
            if number is None:
                raise TrackerHttpError(
                    422,
                    f"{self.repo} has no milestone {issue.milestone!r}, which the endpoint's "
                    "scope asks of every task. Create the milestone, or change the scope",
                    method="POST",
                    path=f"/repos/{self.repo}/issues",
                )
            payload["milestone"] = number
        return mapping.tracked(self.repo, await self.client.create_issue(payload))

    async def comment_marks(self, number: int) -> set[str]:
        return {
            mark for c in await self.client.comments(number) if (mark := mark_in(c.get("body")))
        }

    async def steps(self, number: int, change: TrackerChange) -> list[Step]:
        return write_steps(self.client, number, change)


def _last_page(response: httpx.Response) -> int | None:
    last = response.links.get("last", {}).get("url")
    if last is None:
        return 1 if "next" not in response.links else None
    page = httpx.URL(last).params.get("page")
    return int(page) if page and page.isdigit() else None
