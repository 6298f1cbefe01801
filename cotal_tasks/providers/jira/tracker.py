"""Jira Cloud as a ``Tracker``: list changed issues by JQL, fetch one with its remote
links, create, and apply planned writes through the workflow.

The walk: ``project = KEY [AND (jql)] AND updated >= "<minute>" ORDER BY updated ASC,
key ASC``. JQL compares times to the minute, in the API user's time zone (read once from
``/myself``), so each poll starts at the minute of the cursor less the overlap and drops
what it has read already by key and ``updated`` (``seen``, kept in the checkpoint): an
issue edited in the cursor's own minute is never skipped, and an unchanged project costs
one search request. Pages follow ``nextPageToken``; an issue read earlier in the walk
that comes again with a newer ``updated`` was edited while the walk ran, which may have
moved the rest of the ordering under the token, so the walk reads on once more from
where that issue first stood.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cotal_tasks.providers.hosted.boundary import (
    ItemBoundary,
    as_dict,
    as_ms,
    as_str,
    at_path,
    iso_ms,
)
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.paging import PageCap, at_edge
from cotal_tasks.providers.hosted.scope import HORIZON
from cotal_tasks.providers.hosted.tracker import (
    MARKED_PAGES,
    Evidence,
    IssueGone,
    ListPage,
    NewIssue,
    Order,
    Step,
    TrackedIssue,
    Tracker,
    TrackerChange,
)
from cotal_tasks.providers.jira import mapping, workflow
from cotal_tasks.providers.jira.client import JiraClient
from cotal_tasks.providers.jira.config import JiraConfig

log = logging.getLogger(__name__)

SEEN = "seen"  # the checkpoint's (key -> updated ms) of the issues at the window's edge
REWALKS = 3
_WIDE_MS = 14 * 3600 * 1000  # any zone's offset: the window when the zone is not known
_STATE_FIELDS = ("assignee", "status", "resolution", "labels")


class JiraTracker(Tracker):
    """A claim never rides on a label alone (``single_assignee`` is false); the project's
    id (``known_id``) is learned from its issues."""

    name = "Jira"

    def __init__(
        self,
        client: JiraClient,
        config: JiraConfig,
        boundary: ItemBoundary,
        project: str | None = None,  # default: the first project
    ) -> None:
        project = project or config.location
        super().__init__(boundary, path=project, mutation_spacing_s=config.mutation_spacing_s)
        self.client = client
        self.config = config
        self.project = project
        self._zone: tzinfo | None = None
        self._zone_known = False

    def sibling(self, source: str) -> Self:
        if source == self.project:
            return self
        client = JiraClient(self.client.http, source, self.config.page_size)
        return type(self)(client, self.config, self.boundary, source)

    # -- reading ---------------------------------------------------------------------

    def _scope(self, *clauses: str) -> str:
        """The project, the configured ``jql`` and ``clauses``, ANDed."""
        scope = f'project = "{self.project}"'
        jql = f" AND ({self.config.jql})" if self.config.jql else ""
        return " AND ".join((f"{scope}{jql}", *clauses))

    async def _user_zone(self) -> tzinfo | None:
        """The API user's time zone, which JQL reads its times in (``None``: unknown)."""
        if not self._zone_known:
            name = as_str((await self.client.myself()).get("timeZone"))
            try:
                self._zone = ZoneInfo(name) if name else None
            except (ZoneInfoNotFoundError, ValueError):
                self._zone = None
            if self._zone is None:
                log.warning("Jira names no time zone this machine knows; polls read a wide window")
            self._zone_known = True
        return self._zone

    async def _minute(self, ms: int) -> str:
        """``ms`` as a JQL time: its minute in the user's zone (rounded down). With no
        known zone, the minute in UTC ``_WIDE_MS`` earlier: wider, never later."""
        zone = await self._user_zone()
        at = datetime.fromtimestamp((ms if zone else ms - _WIDE_MS) / 1000, zone or UTC)
        return at.strftime("%Y-%m-%d %H:%M")

    def _learn(self, item: Mapping[str, Any]) -> None:
        project = as_dict(at_path(item, "fields", "project"))
        if self.known_id is None and as_str(project.get("key")) == self.project:
            pid = as_str(project.get("id"))
            self.known_id = int(pid) if pid and pid.isdigit() else None

    def _tracked(
        self, item: Any, evidence: Any = (), number: int | None = None
    ) -> TrackedIssue | None:
        if not isinstance(item, dict):
            self.boundary.note("item-unmappable", "an item of a Jira answer")
            return None
        self._learn(item)
        return self.boundary.map(
            f"issue {as_str(item.get('key'))}",
            lambda: mapping.tracked(
                self.project,
                item,
                evidence,
                include_secured=self.config.include_secured,
                number=number,
            ),
        )

    def _withheld(self, item: Mapping[str, Any]) -> bool:
        return mapping.is_secured(item) and not self.config.include_secured

    async def _evidence(self, item: Mapping[str, Any]) -> list[Evidence]:
        key = as_str(item.get("key"))
        if not self.config.remote_links or key is None or self._withheld(item):
            return []
        at = as_ms(at_path(item, "fields", "updated"))
        found: list[Evidence] = []
        for link in await self.client.remote_links(key):
            read = self.boundary.map(
                f"remote link of {key}",
                mapping.link_evidence,
                as_dict(link),
                at,
                reason="evidence-refused",
            )
            found += read or ()
        return found

    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        seen: dict[str, int] = {
            k: v for k, v in as_dict(remembered.get(SEEN)).items() if isinstance(v, int)
        }
        overlap = int(self.config.overlap_s * 1000)
        highest = as_ms(cursor) if cursor else 0
        start = highest - overlap if cursor else None
        read: dict[str, int] = {}  # this poll's keys and their updated
        cap = PageCap(self.client.http)  # one walk, its rewalks included
        imported = await self._import_clauses(cursor, remembered.get(HORIZON))
        for _ in range(REWALKS + 1):
            since = None if start is None else await self._minute(start)
            bound = [f'updated >= "{since}"'] if since else imported
            jql = f"{self._scope(*bound)} ORDER BY updated ASC, key ASC"
            restart: int | None = None
            async for page in self.client.search(jql, mapping.FIELDS, cap=cap):
                issues: list[TrackedIssue] = []
                for item in self.boundary.page(page.get("issues"), "the issue search"):
                    key = as_str(as_dict(item).get("key"))
                    if key is None:
                        self.boundary.note("item-unmappable", "an item of the issue search")
                        continue
                    stamp = as_ms(at_path(item, "fields", "updated"))
                    earlier = read.get(key)
                    if earlier is not None and stamp > earlier:
                        restart = earlier if restart is None else min(restart, earlier)
                    if stamp and (earlier == stamp or seen.get(key) == stamp):
                        continue  # read already, unchanged since
                    read[key] = stamp
                    highest = max(highest, stamp)
                    if issue := self._tracked(item, await self._evidence(item)):
                        issues.append(issue)
                seen = at_edge({**seen, **read}, highest - overlap - 60_000)
                yield ListPage(
                    issues, cursor=iso_ms(highest) if highest else cursor, remember={SEEN: seen}
                )
            if restart is None:
                return
            start = restart  # an edit during the walk may have shifted what the token read

    async def _import_clauses(self, cursor: str | None, horizon: Any) -> list[str]:
        """What an import (no cursor yet) asks beside the project: the scope as JQL
        (``JiraConfig.scope_clauses``), with the horizon as "open, or changed since its
        edge". A later poll asks only what changed since the cursor, unscoped: a search
        with the scope's clauses cannot show an issue *leaving* the slice (its label
        removed, it is no longer found), so the scope is checked on what changed
        (``hosted.scope``)."""
        if cursor is not None:
            return []
        edge = await self._minute(horizon) if isinstance(horizon, int) else None
        return self.config.scope_clauses(edge)

    async def _issue_keys(self, jql: str, limit: int | None = None) -> tuple[list[Any], int]:
        found: list[Any] = []
        requests = 0
        async for page in self.client.search(jql, ("status",), limit=limit):
            requests += 1
            found += self.boundary.page(page.get("issues"), "the issue search")
        return found, requests

    async def open_numbers(self) -> tuple[set[int], int]:
        clauses = (*self.config.scope_clauses(), "statusCategory != Done")
        jql = f"{self._scope(*clauses)} ORDER BY key ASC"
        items, requests = await self._issue_keys(jql)
        numbers = {
            parsed[1]
            for item in items
            if (parsed := mapping.split_key(as_dict(item).get("key"))) and parsed[0] == self.project
        }
        return numbers, requests

    async def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        bound = ""
        if since_ms is not None:  # JQL reads the minute in the user's zone (``_minute``)
            bound = f' AND created >= "{await self._minute(since_ms)}"'
        jql = f"{self._scope()}{bound} ORDER BY {order} DESC, key DESC"
        pages = self.client.search(
            jql, mapping.FIELDS, properties=(mapping.PROPERTY,), pages=MARKED_PAGES
        )
        async for page in pages:
            items = self.boundary.page(page.get("issues"), "the issue search")
            yield [issue for item in items if (issue := self._tracked(item))]

    async def fetch(self, number: int) -> TrackedIssue | None:
        key = mapping.issue_key(self.project, number)
        try:
            item = await self.client.read_issue(key, mapping.FIELDS)
        except IssueGone as exc:
            return mapping.gone(self.project, number, exc.fate)
        if not item:
            return None
        moved = mapping.split_key(item.get("key")) != (self.project, number)
        evidence = [] if moved else await self._evidence(item)
        return self._tracked(item, evidence, number=number)

    # -- writing ---------------------------------------------------------------------
    async def create(self, issue: NewIssue) -> TrackedIssue:
        text, mark = workflow.marked_text(issue.body or "")
        fields: dict[str, Any] = {
            "project": {"key": self.project},
            "summary": issue.title,
            "issuetype": {"name": issue.issue_type or self.config.issue_type},
        }
        if issue.milestone:
            fields["fixVersions"] = [{"name": issue.milestone}]
        if issue.assignees:
            fields["assignee"] = {"accountId": issue.assignees[0]}
        if text:
            fields["description"] = workflow.document(text)
        labels = [label for label in issue.labels if label != mapping.IN_PROGRESS]
        if labels:
            fields["labels"] = labels
        created = await self.client.create(fields, mark)
        parsed = mapping.split_key(created.get("key"))
        if parsed is None:
            raise TrackerHttpError(
                None, "Jira answered the create with no issue key", method="POST", path="issue"
            )
        item = await self.client.read_issue(str(created["key"]), mapping.FIELDS)
        self._learn(item)
        return mapping.tracked(self.project, item, include_secured=True)

    async def comment_marks(self, number: int) -> set[str]:
        key = mapping.issue_key(self.project, number)
        comments = await self.client.recent_comments(key)
        return {mark for comment in comments if (mark := mapping.comment_mark(comment))}

    async def steps(self, number: int, change: TrackerChange) -> list[Step]:
        """Everything that can refuse is read and checked first (the transition, its
        screen, who is assigned), so a refusal writes nothing; then the assignee, the
        transition, labels and description, and the comment."""
        key = mapping.issue_key(self.project, number)
        steps: list[Step] = []
        fields = await self._fields_now(key)
        category = as_str(at_path(fields, "status", "statusCategory", "key"))
        target = workflow.target_of(change, self.config, category)
        move = None
        if target is not None and not target.holds(fields):
            move = await self._plan_move(key, fields, target)
        if change.assign or change.unassign:
            fields = await self._fields_now(key) if move else fields  # who holds it now
            if (assign := self._assignment(key, fields, change)) is not None:
                steps.append(("assignee", assign))
        if move is not None:
            steps.append(("transition", move))
        body: dict[str, Any] = {}
        if ops := workflow.label_update(change):
            body["update"] = {"labels": ops}
        if change.body is not None:
            body["fields"] = {"description": workflow.document(change.body)}
        if body:
            steps.append(("edit", lambda: self.client.edit(key, body)))
        if change.comment:
            text, mark = workflow.marked_text(change.comment)
            document = workflow.document(text or "") or {}
            steps.append(("comment", lambda: self.client.comment(key, document, mark)))
        return steps

    async def _fields_now(self, key: str) -> Mapping[str, Any]:
        current = await self.client.get_issue(key, _STATE_FIELDS)
        if current is None:
            raise TrackerHttpError(404, "the issue is gone", method="GET", path=key)
        return as_dict(current.get("fields"))

    def _assignment(
        self, key: str, fields: Mapping[str, Any], change: TrackerChange
    ) -> Callable[[], Awaitable[None]] | None:
        """The write that assigns the claiming seat's account, or unassigns a released
        seat's (``None``: nothing to write). A person's assignment is never replaced or
        removed."""
        held = as_str(as_dict(fields.get("assignee")).get("accountId"))
        if change.assign:
            wanted = change.assign[0]
            if held is not None and held != wanted and held not in change.unassign:
                raise workflow.refused(
                    f"{key} is assigned to someone else in Jira, and a claim never replaces "
                    "a person's assignment. Unassign them in Jira, or claim another task",
                    key,
                    "assignee",
                )
            return None if held == wanted else lambda: self.client.assign(key, wanted)
        if change.unassign and held in change.unassign:
            return lambda: self.client.assign(key, None)
        return None

    async def _plan_move(
        self, key: str, fields: Mapping[str, Any], target: workflow.Target
    ) -> Callable[[], Awaitable[None]]:
        """The write that moves the issue to ``target``, checked before anything is sent."""
        status = as_str(at_path(fields, "status", "name")) or "?"
        category = as_str(at_path(fields, "status", "statusCategory", "key"))
        if category == target.category == "done" and target.resolution is not None:
            # Done already, with another resolution: the resolution is edited in place.
            edit = {"fields": {"resolution": {"name": target.resolution}}}
            return lambda: self.client.edit(key, edit)
        transitions = await self.client.transitions(key)
        tid, screen = workflow.pick_transition(transitions, target, key, status)
        return lambda: self.client.transition(key, tid, screen)
