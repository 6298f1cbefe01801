"""Linear as a ``Tracker``: walk the changed issues of the synced teams, read one with
its attachments, create, and apply planned writes as one ``issueUpdate``.

The walk asks ``issues(filter: {team, scope…, updatedAt: {gte: cursor − overlap}},
orderBy: updatedAt)`` with Relay cursors (``first``/``after``). Linear lists the most
recently updated first, so the cursor moves only once a walk is read through: to the
newest ``updatedAt`` it saw. Each page keeps where the walk stands (its start, its next
``after``, the newest stamp) in the checkpoint, so a walk cut short by a rate limit or a
restart resumes at its next page instead of starting over. An issue updated during the
walk leaves the part still to read (keyset cursors do not shift) and is newer than the
stamp the walk ends on, so the next poll reads it. An unchanged board costs one small
query: the issues updated within the overlap, usually none.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

from cotal_tasks.providers.hosted.boundary import (
    ItemBoundary,
    as_dict,
    as_int,
    as_list,
    as_ms,
    as_str,
    at_path,
    iso_ms,
)
from cotal_tasks.providers.hosted.paging import PageCap, at_edge
from cotal_tasks.providers.hosted.tracker import (
    MARKED_PAGES,
    ListPage,
    NewIssue,
    Order,
    Step,
    TrackedIssue,
    Tracker,
    TrackerChange,
)
from cotal_tasks.providers.linear import mapping, queries, workflow
from cotal_tasks.providers.linear.client import LinearClient, LinearRefused, NotFound
from cotal_tasks.providers.linear.config import CLOSED_TYPES, LinearConfig

PROBE = 10  # the first page of a poll since a cursor
WALK = "walk"  # the checkpoint's entry: a walk not read through yet (since, after, top)
SEEN = "seen"  # the checkpoint's identifier -> updatedAt (ms) at the window's edge
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class LinearTracker(Tracker):
    """The issues of ``config.teams`` within ``config``'s scope."""

    name = "Linear"

    def __init__(self, client: LinearClient, config: LinearConfig, boundary: ItemBoundary) -> None:
        super().__init__(
            boundary, path=config.location, mutation_spacing_s=config.mutation_spacing_s
        )
        self.client = client
        self.config = config
        self.teams = config.teams
        self._team_ids: dict[str, str] = {}

    def number_of(self, task_id: str) -> int | None:
        parsed = mapping.split(task_id)
        return mapping.number_of(task_id) if parsed and parsed[0] in self.teams else None

    # -- reading ---------------------------------------------------------------------
    def scope(self) -> dict[str, Any]:
        """The endpoint's teams and scope as Linear's ``IssueFilter``."""
        cfg = self.config
        found: dict[str, Any] = {"team": {"key": {"in": list(cfg.teams)}}}
        both: list[dict[str, Any]] = []
        if cfg.project is not None:
            by = (
                {"id": {"eq": cfg.project}}
                if _UUID.match(cfg.project)
                else {"name": {"eqIgnoreCase": cfg.project}}
            )
            found["project"] = by
        both += [{"labels": {"some": {"name": {"eqIgnoreCase": label}}}} for label in cfg.labels]
        if cfg.cycle == "active":
            found["cycle"] = {"isActive": {"eq": True}}
        elif cfg.cycle is not None:
            found["cycle"] = {"number": {"eq": cfg.cycle}}
        if cfg.states:
            found["state"] = {"type": {"in": list(cfg.states)}}
        if both:
            found["and"] = both
        return found

    def _tracked(self, node: Any, asked: int | None = None) -> TrackedIssue | None:
        if not isinstance(node, dict):
            self.boundary.note("item-unmappable", "an item of a Linear answer")
            return None
        return self.boundary.map(
            f"issue {as_str(node.get('identifier'))}", mapping.tracked, node, self.teams, asked
        )

    async def _page(
        self,
        filter_: Mapping[str, Any],
        *,
        after: str | None,
        order: str,
        evidence: bool,
        first: int | None = None,
    ) -> tuple[list[Any], str | None]:
        """One page of ``issues``: its nodes, and the cursor of the next (``None``: last).
        The first page this tracker reads also asks for its teams (``_learn_teams``)."""
        learn = not self._team_ids
        data = await self.client.query(
            queries.ISSUES,
            {
                "filter": dict(filter_),
                "first": first or self.config.page_size,
                "after": after,
                "orderBy": order,
                "evidence": evidence,
                "keys": list(self.teams),
                "withTeams": learn,
            },
        )
        if learn:
            self._learn_teams(data)
        connection = as_dict(data.get("issues"))
        nodes = self.boundary.page(connection.get("nodes"), "the issue listing")
        info = as_dict(connection.get("pageInfo"))
        end = as_str(info.get("endCursor"))
        return nodes, end if info.get("hasNextPage") is True and end else None

    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        walk = as_dict(remembered.get(WALK))
        seen = {k: v for k, v in as_dict(remembered.get(SEEN)).items() if isinstance(v, int)}
        overlap = int(self.config.overlap_s * 1000)
        if walk:  # resume the walk a poll did not read through
            since, after = as_str(walk.get("since")), as_str(walk.get("after"))
            top = as_int(walk.get("top")) or 0
        else:
            since = iso_ms(max(0, as_ms(cursor) - overlap)) if cursor and as_ms(cursor) else None
            after, top = None, 0
        wanted = self.scope() | ({"updatedAt": {"gte": since}} if since else {})
        cap = PageCap(self.client.http)
        # A poll since a cursor asks a small first page: Linear prices a query by the
        # nodes it may return, and most polls find few changes.
        first: int | None = min(PROBE, self.config.page_size) if since and after is None else None
        read: dict[str, int] = {}
        while True:
            cap.take(self.client.path, "POST")
            nodes, after = await self._page(
                wanted, after=after, order="updatedAt", evidence=True, first=first
            )
            first = None
            issues: list[TrackedIssue] = []
            for node in nodes:
                identifier = as_str(as_dict(node).get("identifier")) or ""
                stamp = as_ms(as_dict(node).get("updatedAt"))
                top = max(top, stamp)
                if stamp and seen.get(identifier) == stamp:
                    continue  # read at the window's edge already, unchanged since
                read[identifier] = stamp
                if issue := self._tracked(node):
                    issues.append(issue)
                    issues += mapping.moved_away(as_dict(node), self.teams)
            if after is not None:
                state = {"since": since, "after": after, "top": top}
                yield ListPage(issues, remember={WALK: state})
                continue
            edge = at_edge({**seen, **read}, top - overlap - 1000)
            yield ListPage(
                issues, cursor=iso_ms(top) if top else cursor, remember={WALK: None, SEEN: edge}
            )
            return

    async def open_numbers(self) -> tuple[set[int], int]:
        wanted = self.scope()
        wanted["state"] = {"type": {"nin": sorted(CLOSED_TYPES)}}
        numbers: set[int] = set()
        after: str | None = None
        cap = PageCap(self.client.http)
        requests = 0
        while True:
            cap.take(self.client.path, "POST")
            requests += 1
            data = await self.client.query(
                queries.IDENTIFIERS, {"filter": wanted, "first": 100, "after": after}
            )
            connection = as_dict(data.get("issues"))
            for node in self.boundary.page(connection.get("nodes"), "the open issues"):
                number = self.number_of(as_str(as_dict(node).get("identifier")) or "")
                if number is not None:
                    numbers.add(number)
            info = as_dict(connection.get("pageInfo"))
            after = as_str(info.get("endCursor"))
            if info.get("hasNextPage") is not True or not after:
                return numbers, requests

    async def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        wanted = self.scope()
        if since_ms is not None:
            wanted["createdAt"] = {"gte": iso_ms(max(0, since_ms))}
        after: str | None = None
        for _ in range(MARKED_PAGES):
            nodes, after = await self._page(wanted, after=after, order=f"{order}At", evidence=False)
            yield [issue for node in nodes if (issue := self._tracked(node))]
            if after is None:
                return

    async def fetch(self, number: int) -> TrackedIssue | None:
        identifier = mapping.identifier_of(number)
        try:
            data = await self.client.query(queries.ISSUE, {"id": identifier, "evidence": True})
        except NotFound:
            # Gone only while its team still reads (else: a token that lost access).
            data = await self.client.query(queries.TEAMS, {"keys": [identifier.split("-")[0]]})
            if not as_list(at_path(data, "teams", "nodes")):
                raise
            return TrackedIssue.vanished(number, identifier, "deleted")
        node = data.get("issue")
        return None if not isinstance(node, dict) else self._tracked(node, asked=number)

    async def team_id(self, key: str) -> str:
        """The team's id (read once for every synced team); refused when it does not read."""
        if key not in self._team_ids:
            self._learn_teams(await self.client.query(queries.TEAMS, {"keys": list(self.teams)}))
        return self._team_ids[key]

    def _learn_teams(self, data: Mapping[str, Any]) -> None:
        """Keep the synced teams' ids; a team that does not read is refused (404), since
        Linear's filter would answer an empty board for it, never an error."""
        for node in as_list(at_path(data, "teams", "nodes")):
            node = as_dict(node)
            if (k := as_str(node.get("key"))) and (tid := as_str(node.get("id"))):
                self._team_ids[k] = tid
        missing = [key for key in self.teams if key not in self._team_ids]
        if missing:
            self._team_ids.clear()
            raise NotFound(
                404,
                f"the team(s) {', '.join(missing)} do not read with this token. Check teams "
                "(keys as Linear shows them, ENG of ENG-123) and that the token's user is "
                "a member",
                method="POST",
                path=self.client.path,
            )

    # -- writing ---------------------------------------------------------------------
    async def create(self, issue: NewIssue) -> TrackedIssue:
        team = await self.team_id(self.config.home_team)
        wanted = {"teamId": team, "title": issue.title, "description": issue.body or ""}
        made = await self.client.query(
            queries.CREATE, {"input": wanted | await self._scope_needs(team)}
        )
        identifier = as_str(at_path(made, "issueCreate", "issue", "identifier"))
        number = mapping.number_of(identifier)
        if number is None or at_path(made, "issueCreate", "success") is not True:
            raise LinearRefused(
                None,
                "Linear answered the create with no issue",
                method="POST",
                path=self.client.path,
            )
        found = await self.fetch(number)
        if found is None:
            raise LinearRefused(
                None,
                f"{identifier} does not read after its create",
                method="POST",
                path=self.client.path,
            )
        return found

    async def _scope_needs(self, team: str) -> dict[str, Any]:
        """What a created issue carries to stay in the scope (its labels, project and
        cycle, by id), read before it is created; one that Linear does not have is
        refused, nothing sent."""
        cfg = self.config
        by_id = cfg.project is not None and _UUID.match(cfg.project) is not None
        project = None if by_id else cfg.project
        if not cfg.labels and project is None and cfg.cycle is None:
            return {"projectId": cfg.project} if by_id else {}
        data = await self.client.query(
            queries.SCOPE_NEEDS,
            {
                "labels": list(cfg.labels),
                "withLabels": bool(cfg.labels),
                "project": project or "",
                "withProject": project is not None,
                "team": team,
                "number": cfg.cycle if isinstance(cfg.cycle, int) else None,
                "withCycle": cfg.cycle is not None,
                "active": cfg.cycle == "active",
            },
        )
        return workflow.scope_ids(data, cfg, team, by_id)

    async def comment_marks(self, number: int) -> set[str]:
        data = await self.client.query(queries.COMMENTS, {"id": mapping.identifier_of(number)})
        return mapping.comment_marks(as_list(at_path(data, "issue", "comments", "nodes")))

    async def steps(self, number: int, change: TrackerChange) -> list[Step]:
        """Everything that can refuse is read and checked first (the state to move to,
        the labels, who holds the issue), so a refusal writes nothing; then one update
        and the comment."""
        identifier = mapping.identifier_of(number)
        names = workflow.labels_named(change)
        account = change.assign[0] if change.assign else ""
        before = await self.client.query(
            queries.BEFORE_WRITE,
            {
                "id": identifier,
                "labels": names,
                "withLabels": bool(names),
                "account": account,
                "withAccount": bool(account),
            },
        )
        issue = as_dict(before.get("issue"))
        state = as_dict(issue.get("state"))
        update: dict[str, Any] = {}
        target = workflow.target_of(change, self.config, as_str(state.get("type")))
        if target is not None and not target.holds(state):
            update["stateId"] = workflow.pick_state(workflow.states_of(issue), target, identifier)
        agent = at_path(before, "user", "app") is True
        update |= workflow.assignment(change, issue, agent, identifier)
        added, removed = workflow.label_ids(
            change,
            as_list(at_path(before, "issueLabels", "nodes")),
            as_list(at_path(issue, "labels", "nodes")),
            as_str(at_path(issue, "team", "id")),
            identifier,
        )
        if added:
            update["addedLabelIds"] = added
        if removed:
            update["removedLabelIds"] = removed
        if change.body is not None:
            update["description"] = change.body
        steps: list[Step] = []
        if update:
            steps.append(
                (
                    "update",
                    lambda: self._write(
                        queries.UPDATE, "issueUpdate", {"id": identifier, "input": update}
                    ),
                )
            )
        if change.comment:
            body = {
                "input": {"issueId": as_str(issue.get("id")) or identifier, "body": change.comment}
            }
            steps.append(("comment", lambda: self._write(queries.COMMENT, "commentCreate", body)))
        return steps

    async def _write(self, document: str, field: str, variables: Mapping[str, Any]) -> None:
        done = await self.client.query(document, variables)
        if at_path(done, field, "success") is not True:
            raise LinearRefused(
                400, f"{field} did not succeed", method="POST", path=self.client.path
            )
