"""Linear as a ``Tracker`` over one team of the endpoint (each team is a source, with its
own tracker: ``sibling``): walk the changed issues of the team, read one with its
attachments, create, and apply planned writes as one ``issueUpdate``.

An import asks ``issues(filter: {team, scope…})``: the scope as far as Linear's filter
can say it (labels, project, cycle, state types, the horizon as "open, or changed since
its edge"). A poll since a cursor asks ``issues(filter: {team, updatedAt: {gte: cursor −
overlap}})``, unscoped: a filter with the scope cannot show an issue *leaving* it (its
label removed, it is no longer found), so the scope is checked on every issue read
(``hosted.scope``, ``LinearConfig.outside_natively``). Both order by ``updatedAt`` with
Relay cursors (``first``/``after``). Linear lists the most
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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Self

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
from cotal_tasks.providers.hosted.scope import HORIZON, NOBODY
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
    """The issues of one of ``config``'s teams (``team``, default the first) within
    ``config``'s scope."""

    name = "Linear"

    def __init__(
        self,
        client: LinearClient,
        config: LinearConfig,
        boundary: ItemBoundary,
        team: str | None = None,
    ) -> None:
        team = team or config.location
        super().__init__(boundary, path=team, mutation_spacing_s=config.mutation_spacing_s)
        self.client = client
        self.config = config
        self.team = team
        self.endpoint_teams = config.sources  # every team of the endpoint: task ids
        self._team_id: str | None = None

    def sibling(self, source: str) -> Self:
        if source == self.team:
            return self
        if source not in self.endpoint_teams:
            raise ValueError(f"{source} is not a team of this endpoint")
        return type(self)(self.client, self.config, self.boundary, source)

    def number_of(self, task_id: str) -> int | None:
        """The number of a task id of this team (the id's team: the task's first)."""
        parsed = mapping.split(task_id)
        return mapping.number_of(task_id) if parsed and parsed[0] == self.team else None

    def task_id_of(self, number: int) -> str:
        return mapping.identifier_of(number)

    @property
    def facts(self) -> bool:
        """Whether issue reads ask for the project, the cycle and when it closed."""
        cfg = self.config
        return cfg.project is not None or cfg.cycle is not None or bool(cfg.scope.horizon_days)

    # -- reading ---------------------------------------------------------------------
    def scope(self, horizon: str | None = None) -> dict[str, Any]:
        """The team and the scope as Linear's ``IssueFilter``, as far as it can say it:
        the labels, project, cycle, state types, the assignee (its account as the
        assignee or the delegate; "none": neither is anyone but a seat), and with
        ``horizon`` (ISO time) the open issues plus those changed since it. Excluded
        labels are checked on each issue alone (Linear compares label names
        case-sensitively, and the scope does not)."""
        cfg = self.config
        found: dict[str, Any] = {"team": {"key": {"eq": self.team}}}
        both: list[dict[str, Any]] = []
        if cfg.project is not None:
            by = (
                {"id": {"eq": cfg.project}}
                if _UUID.match(cfg.project)
                else {"name": {"eqIgnoreCase": cfg.project}}
            )
            found["project"] = by
        both += [
            {"labels": {"some": {"name": {"eqIgnoreCase": label}}}} for label in cfg.scope.labels
        ]
        if cfg.cycle == "active":
            found["cycle"] = {"isActive": {"eq": True}}
        elif cfg.cycle is not None:
            found["cycle"] = {"number": {"eq": cfg.cycle}}
        if cfg.states:
            found["state"] = {"type": {"in": list(cfg.states)}}
        both += self._assignee()
        if horizon is not None:
            open_ = {"state": {"type": {"nin": sorted(CLOSED_TYPES)}}}
            both.append({"or": [open_, {"updatedAt": {"gte": horizon}}]})
        if both:
            found["and"] = both
        return found

    def _assignee(self) -> list[dict[str, Any]]:
        """The scope's assignee as ``IssueFilter`` clauses (ANDed)."""
        scope = self.config.scope
        if scope.account is not None:
            mine = {"id": {"eq": scope.account}}
            return [{"or": [{"assignee": mine}, {"delegate": mine}]}]
        if scope.assignee == NOBODY:
            seats = sorted(self.config.seats)
            return [
                {"or": [{who: {"null": True}}, {who: {"id": {"in": seats}}}]}
                for who in ("assignee", "delegate")
            ]
        return []

    def _tracked(self, node: Any, asked: int | None = None) -> TrackedIssue | None:
        if not isinstance(node, dict):
            self.boundary.note("item-unmappable", "an item of a Linear answer")
            return None
        return self.boundary.map(
            f"issue {as_str(node.get('identifier'))}",
            mapping.tracked,
            node,
            self.endpoint_teams,
            asked,
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
        A walk's first page also asks for the team (``_learn_team``): a deleted team, or
        one the token no longer reads, is refused there, never read as an empty board."""
        learn = after is None
        data = await self.client.query(
            queries.ISSUES,
            {
                "filter": dict(filter_),
                "first": first or self.config.page_size,
                "after": after,
                "orderBy": order,
                "evidence": evidence,
                "facts": self.facts,
                "team": self.team,
                "withTeam": learn,
            },
        )
        if learn:
            self._learn_team(data)
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
        if since:  # what changed, unscoped: an issue leaving the scope is seen leaving
            wanted = {"team": {"key": {"eq": self.team}}, "updatedAt": {"gte": since}}
        else:
            horizon = as_int(remembered.get(HORIZON))
            wanted = self.scope(iso_ms(horizon) if horizon is not None else None)
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
                task = mapping.task_identifier(as_dict(node), self.endpoint_teams)
                if task is not None and (number := mapping.number_of(task)) is not None:
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
            data = await self.client.query(
                queries.ISSUE, {"id": identifier, "evidence": True, "facts": self.facts}
            )
        except NotFound:
            # Gone only while its team still reads (else: a token that lost access).
            data = await self.client.query(queries.TEAMS, {"team": identifier.split("-")[0]})
            if not as_list(at_path(data, "teams", "nodes")):
                raise
            return TrackedIssue.vanished(number, identifier, "deleted")
        node = data.get("issue")
        return None if not isinstance(node, dict) else self._tracked(node, asked=number)

    async def team_id(self) -> str:
        """The team's id (read once); refused when the team does not read."""
        if self._team_id is None:
            self._learn_team(await self.client.query(queries.TEAMS, {"team": self.team}))
        assert self._team_id is not None
        return self._team_id

    def _learn_team(self, data: Mapping[str, Any]) -> None:
        """Keep the team's id; a team that does not read is refused (404), since Linear's
        filter would answer an empty board for it, never an error."""
        self._team_id = None
        for node in as_list(at_path(data, "teams", "nodes")):
            node = as_dict(node)
            if as_str(node.get("key")) == self.team and (tid := as_str(node.get("id"))):
                self._team_id = tid
        if self._team_id is None:
            raise NotFound(
                404,
                f"the team {self.team} does not read with this token. Check teams (keys as "
                "Linear shows them, ENG of ENG-123) and that the token's user is a member",
                method="POST",
                path=self.client.path,
            )

    # -- writing ---------------------------------------------------------------------
    async def create(self, issue: NewIssue) -> TrackedIssue:
        team = await self.team_id()
        wanted = {"teamId": team, "title": issue.title, "description": issue.body or ""}
        made = await self.client.query(
            queries.CREATE, {"input": wanted | await self._scope_needs(team, issue)}
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

    async def _scope_needs(self, team: str, issue: NewIssue) -> dict[str, Any]:
        """What a created issue carries to stay in the scope (its labels, project, cycle
        and the scope's account, by id), read before it is created; one that Linear does
        not have is refused, nothing sent."""
        cfg = self.config
        by_id = cfg.project is not None and _UUID.match(cfg.project) is not None
        project = None if by_id else cfg.project
        labels = [label for label in issue.labels if label != mapping.STARTED]
        account = issue.assignees[0] if issue.assignees else ""
        if not labels and project is None and cfg.cycle is None and not account:
            return {"projectId": cfg.project} if by_id else {}
        data = await self.client.query(
            queries.SCOPE_NEEDS,
            {
                "labels": labels,
                "withLabels": bool(labels),
                "project": project or "",
                "withProject": project is not None,
                "team": team,
                "number": cfg.cycle if isinstance(cfg.cycle, int) else None,
                "withCycle": cfg.cycle is not None,
                "active": cfg.cycle == "active",
                "account": account,
                "withAccount": bool(account),
            },
        )
        where = workflow.Created(self.team, team, tuple(labels), by_id)
        return workflow.scope_ids(data, cfg, where)

    async def comment_marks(self, number: int) -> set[str]:
        data = await self.client.query(queries.COMMENTS, {"id": mapping.identifier_of(number)})
        notes = as_list(at_path(data, "issue", "comments", "nodes"))
        for session in as_list(at_path(data, "issue", "agentSessions", "nodes")):
            activities = as_list(at_path(session, "activities", "nodes"))
            notes += [as_dict(a).get("content") for a in activities]
        return mapping.comment_marks(notes)

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
                "withNote": bool(change.comment),
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
            steps.append(("comment", self._note(before, identifier, change)))
        return steps

    def _note(
        self, before: Mapping[str, Any], identifier: str, change: TrackerChange
    ) -> Callable[[], Awaitable[None]]:
        """The note's write: an activity of the agent's session where the token is the
        agent's and the issue is delegated to it (a thought, or the response when the
        change ends the work), else a comment."""
        issue = as_dict(before.get("issue"))
        session = workflow.agent_session(before)
        if session is not None:
            kind = "response" if change.state == "closed" else "thought"
            content = {"type": kind, "body": change.comment}
            activity = {"input": {"agentSessionId": session, "content": content}}
            return lambda: self._write(queries.ACTIVITY, "agentActivityCreate", activity)
        body = {"input": {"issueId": as_str(issue.get("id")) or identifier, "body": change.comment}}
        return lambda: self._write(queries.COMMENT, "commentCreate", body)

    async def _write(self, document: str, field: str, variables: Mapping[str, Any]) -> None:
        done = await self.client.query(document, variables)
        if at_path(done, field, "success") is not True:
            raise LinearRefused(
                400, f"{field} did not succeed", method="POST", path=self.client.path
            )
