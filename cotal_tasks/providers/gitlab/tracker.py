"""GitLab as a ``Tracker``: list, fetch with evidence, create, and apply planned writes."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import httpx

from cotal_tasks.providers.gitlab import assignees, mapping
from cotal_tasks.providers.gitlab.client import PER_PAGE, GitLabClient
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.evidence import GitLabEvidence
from cotal_tasks.providers.hosted.boundary import (
    ItemBoundary,
    as_dict,
    as_int,
    as_list,
    as_ms,
    as_stamp,
    as_str,
)
from cotal_tasks.providers.hosted.cadence import FeedClock, Keys
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.scope import HORIZON, outside
from cotal_tasks.providers.hosted.tracker import (
    MARKED_PAGES,
    MOVED,
    PRESENT,
    Evidence,
    IssueGone,
    ListPage,
    NewIssue,
    Order,
    Step,
    TrackedIssue,
    Tracker,
    TrackerChange,
    TrackerRefused,
    epoch_ms,
)
from cotal_tasks.providers.hosted.writeback import mark_in

log = logging.getLogger(__name__)

MARKS = "marks"  # the checkpoint's cursors of the listings beside the issues
MR_MARK = "merge_requests"
MR_CADENCE = Keys("merge_requests")  # the sweep's cadence (``hosted.cadence``)
OPEN_PHASE = "opened"  # an import's listing of the open issues, before the horizon's


def _iso(stamp: datetime) -> str:
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class GitLabTracker(Tracker):
    name = "GitLab"

    def __init__(
        self,
        client: GitLabClient,
        config: GitLabConfig,
        boundary: ItemBoundary,
        project: str | None = None,  # default: the first project
    ) -> None:
        # The project's path names its tasks; a numeric project id learns it from issues.
        project = project or config.location
        super().__init__(boundary, path=project, mutation_spacing_s=config.mutation_spacing_s)
        client.filters = config.listing_filters()
        self.client = client
        self.config = config
        self.project = project
        self.single_assignee = config.single_assignee
        self._path_known = "/" in project
        # The project's stable id, learned from its issues: webhook deliveries match on it.
        self.known_id = int(project) if project.isdigit() else None
        self.evidence = GitLabEvidence(client, config, self.boundary, self._path_from)

    def sibling(self, source: str) -> Self:
        if source == self.project:
            return self
        client = GitLabClient(self.client.http, source, self.config.pagination)
        return type(self)(client, self.config, self.boundary, source)

    @property
    def path_known(self) -> bool:
        """Whether ``path`` is the project's path (a numeric project learns it)."""
        return self._path_known

    def name_path(self, path: str) -> None:
        """The project's path, as GitLab or the mirror's state says it."""
        self.path, self._path_known = path, True

    def _path_from(self, issue: dict[str, Any]) -> str:
        if self.known_id is None:
            self.known_id = as_int(issue.get("project_id"))
        if not self._path_known:
            self.path = mapping.path_of(issue) or self.project
            self._path_known = True
        return self.path

    def _tracked(self, item: Any, found: Any = ()) -> TrackedIssue | None:
        """One issue through the boundary: mapped, or recorded as unmappable."""
        if not isinstance(item, dict):
            self.boundary.note("item-unmappable", "an item of an issue answer")
            return None
        return self.boundary.map(
            f"issue {as_int(item.get('iid'))}",
            lambda: mapping.tracked(
                self._path_from(item),
                item,
                found,
                include_confidential=self.config.include_confidential,
            ),
        )

    def _since(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        at = datetime.fromisoformat(cursor.replace("Z", "+00:00"))
        return _iso(at - timedelta(seconds=self.config.overlap_s))

    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        """The issue listing (``_listings``), then, when their cadence says so
        (``_sweep_due``), the merge requests changed since their own cursor
        (``remembered["marks"]``), which name the issues worth an evidence read."""
        marks: dict[str, str] = dict(remembered.get(MARKS) or {})
        since = self._since(cursor)
        highest = cursor
        first = True
        changed_any = cursor is None  # an import reads the merge requests too
        read: dict[int, str] = {}  # iid -> updated_at read in this walk
        evidenced: dict[int, int] = {}  # iid -> its updated_at (ms) when its evidence was read
        async for response, phase in self._listings(since, remembered.get(HORIZON)):
            issues: list[TrackedIssue] = []
            changed: set[int] = set()
            for item in self.boundary.page(body_of(response), "the issue listing"):
                iid = self._key(item) if isinstance(item, dict) else None
                if not isinstance(item, dict) or iid is None:
                    self.boundary.note("item-unmappable", "an item of the issue listing")
                    continue
                stamp = as_stamp(item.get("updated_at"))
                if read.get(iid) == str(stamp):
                    continue  # the seam of two offset pages: read a moment ago
                read[iid] = str(stamp)
                moves = phase != OPEN_PHASE  # the open issues' pages move no cursor
                if moves and stamp and (highest is None or as_ms(stamp) > epoch_ms(highest)):
                    highest = stamp
                found: list[Evidence] = []
                # A changed issue has its evidence read: a link made in GitLab notes it on
                # the issue (a system note), which moves its updated_at.
                fresh = cursor is None or as_ms(stamp) > epoch_ms(cursor)
                changed_any |= fresh
                # An import's listing is filtered by the scope already (``_listings``); a
                # later poll's is not, and an issue outside the scope costs no evidence.
                wanted = fresh and self._links_read(item)
                if wanted and (cursor is None or not self._scoped_out(item)):
                    found, whole = await self._evidence(
                        item, as_int(item.get("merge_requests_count"))
                    )
                    if whole:  # a part refused: not read, for the sweep's purposes
                        changed.add(iid)
                        evidenced[iid] = as_ms(stamp)
                if issue := self._tracked(item, found):
                    issues.append(issue)
            total = response.headers.get("x-total-pages") if first else None
            first = False
            yield ListPage(
                issues,
                cursor=highest,
                total_pages=int(total) if total and total.isdigit() else None,
                evidenced=frozenset(changed),
            )
        # Merge requests changed since the last sweep name the issues worth an evidence
        # read. The sweep keeps its own cursor, so an interrupted import misses none.
        read_now = self._sweep_due(marks, changed_any, remembered)
        if read_now is None:
            return
        marks |= read_now
        swept = marks.get(MR_MARK)
        newest = swept
        async for response in self.client.merge_request_pages(self._since(swept)):
            linked: set[int] = set()
            for merge_request in self.boundary.page(response.json(), "the merge request listing"):
                if not isinstance(merge_request, dict):
                    self.boundary.note("item-unmappable", "an item of the merge request listing")
                    continue
                stamp = as_stamp(merge_request.get("updated_at"))
                if swept is None or as_ms(stamp) > epoch_ms(swept):
                    named = self._mentioned(merge_request)
                    # An issue whose evidence this walk read after the merge request's
                    # last change already shows it.
                    linked |= {n for n in named if evidenced.get(n, -1) < as_ms(stamp)}
                if stamp and (newest is None or as_ms(stamp) > epoch_ms(newest)):
                    newest = stamp
            yield ListPage(
                (),
                frozenset(linked),
                cursor=highest,
                pages=0,
                remember={MARKS: {**marks, MR_MARK: newest} if newest else marks},
            )

    def _sweep_due(
        self, marks: Mapping[str, str], changed: bool, remembered: Mapping[str, Any]
    ) -> dict[str, str] | None:
        """Whether this poll sweeps the merge requests (``hosted.cadence``): at once when
        the issue listing showed a change (``changed``) or a webhook said the project
        moved since the last sweep (``remembered[MOVED]``), in a poll to the present
        (``remembered[PRESENT]``), else once every ``merge_requests_interval_s``. The
        marks the sweep keeps when it reads; ``None``: not this poll."""
        moved = remembered.get(MOVED)
        moved = moved if isinstance(moved, str) else None
        now = self.client.http.clock_s()
        clock = FeedClock.load(MR_CADENCE, marks)
        asked = clock.asked(changed, moved)
        interval = self.config.merge_requests_interval_s
        if remembered.get(PRESENT) is not True and not clock.due(now, interval, asked):
            return None
        return clock.read(now, 0.0, moved)

    def _scoped_out(self, item: dict[str, Any]) -> bool:
        """Whether a changed issue is outside the endpoint's scope, so its evidence is not
        worth a request (its notes, its merge requests): a later poll lists every changed
        issue unfiltered (see ``_listings``), and in a narrow slice most of them are
        outside it. Its task, if it has one, leaves the scope keeping what it had; coming
        back is a change of the issue, whose evidence is read then. An item that does not
        map is read as before (the mapping counts it)."""
        cfg = self.config
        if not cfg.scope.keys() - {"horizon_days"}:
            return False
        try:
            issue = mapping.tracked(self.path, item, (), include_confidential=True)
        except Exception:  # the boundary: the mapping of the page counts it
            return False
        return outside(cfg.scope, issue, cfg.seats, cfg.outside_natively) is not None

    def _key(self, item: dict[str, Any]) -> int | None:
        """A listed issue's number (a group's: its project's id and its iid together)."""
        return as_int(item.get("iid"))

    def _links_read(self, item: dict[str, Any]) -> bool:
        """Whether a changed issue's links are read (a withheld one's are not)."""
        return not self._withheld(item)

    async def _evidence(
        self, item: dict[str, Any], count: int | None = None
    ) -> tuple[list[Evidence], bool]:
        return await self.evidence.read(item, count)

    def _mentioned(self, merge_request: dict[str, Any]) -> set[int]:
        """The issues of this source a changed merge request names."""
        return mapping.mentioned_issues(self.path, merge_request)

    async def _listings(
        self, since: str | None, horizon: Any
    ) -> AsyncIterator[tuple[httpx.Response, str]]:
        """The issue listing pages of one poll, each with its phase.

        An import (no cursor yet) pushes the scope's filters into GitLab's query, so an
        issue outside the slice is never listed; with an import horizon it reads the open
        issues, then every issue changed since the horizon (``updated_after``): closed
        issues older than it are never listed. The open issues' pages move no cursor: an
        interrupted import starts over from the horizon's listing. A later poll lists
        every issue changed since the checkpoint, unfiltered: GitLab has no feed of label
        or milestone events, and a filtered listing cannot show an issue *leaving* the
        slice (its label removed, it is no longer listed), so the scope is checked here
        on what changed (``hosted.scope``)."""
        if since is not None:
            async for response in self.client.issue_pages(since):
                yield response, "all"
            return
        if isinstance(horizon, int):
            async for response in self.client.issue_pages(None, scoped=True, state="opened"):
                yield response, OPEN_PHASE
            since = _iso(datetime.fromtimestamp(horizon / 1000, UTC))
        async for response in self.client.issue_pages(since, scoped=True):
            yield response, "all"

    async def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        by = "created_at" if order == "created" else "updated_at"
        for page in range(1, MARKED_PAGES + 1):  # no reader needs more
            items = await self.client.recent_issues(PER_PAGE, order=by, page=page)
            yield [issue for item in items if (issue := self._tracked(item))]
            if len(items) < PER_PAGE:
                return

    async def open_numbers(self) -> tuple[set[int], int]:
        return await self.client.open_iids()

    async def fetch(self, number: int) -> TrackedIssue | None:
        try:
            issue = await self.client.read_issue(number)
        except IssueGone as exc:
            return mapping.gone(self.path, number, exc.fate)
        if not isinstance(issue, dict):
            return None
        if self._withheld(issue):
            return self._tracked(issue)  # withheld: its links are not read either
        found, _ = await self.evidence.read(issue)
        return self._tracked(issue, found)

    def _withheld(self, issue: dict[str, Any]) -> bool:
        """A confidential issue the operator did not opt in to: mirrored without anything
        of it, so its links are not read either."""
        return issue.get("confidential") is True and not self.config.include_confidential

    async def create(self, issue: NewIssue) -> TrackedIssue:
        payload: dict[str, Any] = {"title": issue.title}
        if issue.body is not None:
            payload["description"] = issue.body
        if issue.labels:
            payload["labels"] = ",".join(issue.labels)
        if issue.issue_type:
            payload["issue_type"] = issue.issue_type.lower()
        if issue.assignees:
            payload["assignee_ids"] = [await self.client.user_id(name) for name in issue.assignees]
        if issue.milestone:
            milestone = await self.client.milestone_id(issue.milestone)
            if milestone is None:
                raise TrackerHttpError(
                    422,
                    f"project {self.project} has no milestone {issue.milestone!r} (the "
                    "scope's). Create it in the project, or route created tasks elsewhere",
                    method="POST",
                    path=f"projects/{self.project}/issues",
                )
            payload["milestone_id"] = milestone
        created = await self.client.create_issue(payload)
        return mapping.tracked(self._path_from(created), created, include_confidential=True)

    async def comment_marks(self, number: int) -> set[str]:
        notes = await self.client.recent_notes(number)
        return {mark for note in notes if (mark := mark_in(as_dict(note).get("body")))}

    async def _assignees(self, number: int, change: TrackerChange) -> _Assigning:
        """The ``assignee_ids`` to send (the issue's own first, in GitLab's order, so a
        single-assignee tier keeps them), decided on the issue as read right before the
        write: the seat accounts' ids are looked up first, so nothing waits between that
        read and the write."""
        wanted = {name: await self.client.user_id(name) for name in change.assign}
        current = await self.client.get_issue(number)
        if current is None:
            raise TrackerHttpError(404, "the issue is gone", method="GET", path=str(number))
        held = [(str(u["username"]), int(u["id"])) for u in current.get("assignees") or ()]
        ids = {**dict(held), **wanted}
        names = [name for name, _ in held if name not in change.unassign]
        added = [name for name in change.assign if name not in names]
        if added and names and self.single_assignee:
            added = []  # one assignee only, and it is someone's: claim by the label alone
        names += added
        read_ms = as_ms(current.get("updated_at"))
        if names == [name for name, _ in held]:
            return _Assigning(None, [], read_ms)
        return _Assigning([ids[name] for name in names], added, read_ms)

    async def _keep_people(
        self, number: int, change: TrackerChange, plan: _Assigning, result: dict[str, Any]
    ) -> None:
        """After an assignee write: an assignee a person added between the read and the
        write, which the list sent removed, is put back (GitLab's system notes say who
        assigned whom). On a single-assignee tier the person's assignee takes the place,
        and the claim rides on the label. The write has landed: a failing check costs
        only the check (logged), never the write's answer."""
        try:
            await self._repair(number, change, plan, result)
        except TrackerHttpError as exc:
            log.warning("issue %s: assignees not checked after the write (%s)", number, exc)

    async def _repair(
        self, number: int, change: TrackerChange, plan: _Assigning, result: dict[str, Any]
    ) -> None:
        me = await self.client.own_username()
        if me is None:
            log.warning("GitLab does not say who the token is; assignees are not checked")
            return
        notes = as_list(await self.client.recent_notes(number))
        missing = assignees.lost(notes, plan.read_ms, me, result, change.unassign)
        if not missing:
            return
        restore = [await self.client.user_id(name) for name in missing]
        now = await self.client.get_issue(number)
        held = [as_int(as_dict(u).get("id")) for u in (now or result).get("assignees") or ()]
        # The person's first: a tier of one assignee per issue keeps the first id only.
        ids = [*restore, *(i for i in held if i is not None and i not in restore)]
        log.info("issue %s: %s assigned by a person during the write, kept", number, missing)
        repaired = await self.client.update_issue(number, {"assignee_ids": ids})
        kept = {as_str(as_dict(u).get("username")) for u in repaired.get("assignees") or ()}
        if any(name not in kept for name in plan.added):
            log.info("GitLab keeps one assignee per issue here; claims use the label alone")
            self.single_assignee = True

    async def steps(self, number: int, change: TrackerChange) -> list[Step]:
        """One update (assignees, labels, state and description together), then the note.
        The assignees to send are decided on the issue as read here, right before the
        update is sent (the first step: nothing waits between the two)."""
        steps: list[Step] = []
        update: dict[str, Any] = {}
        plan = _Assigning(None, [], 0)
        if change.assign or change.unassign:
            plan = await self._assignees(number, change)
            if plan.ids is not None:
                update["assignee_ids"] = plan.ids
        if change.add_labels:
            update["add_labels"] = ",".join(change.add_labels)
        if change.remove_labels:
            update["remove_labels"] = ",".join(change.remove_labels)
        if change.state == "closed":
            update["state_event"] = "close"
        elif change.state == "open":
            update["state_event"] = "reopen"
        if change.body is not None:
            update["description"] = change.body
        if update:

            async def write() -> None:
                result = await self.client.update_issue(number, update)
                if plan.ids is not None:
                    try:
                        self._check_assigned(plan.ids, plan.added, result, number)
                    except TrackerHttpError as exc:  # the rest of the update took effect
                        raise TrackerRefused(exc, ("update",)) from exc
                    await self._keep_people(number, change, plan, result)

            steps.append(("update", write))
        if change.comment:
            steps.append(("note", lambda: self.client.note(number, change.comment or "")))
        return steps

    def _check_assigned(
        self, sent: list[int], added: list[str], result: dict[str, Any], number: int
    ) -> None:
        got = [u.get("id") for u in result.get("assignees") or ()]
        usernames = {u.get("username") for u in result.get("assignees") or ()}
        missing = [name for name in added if name not in usernames]
        if not missing:
            return
        if len(sent) > 1 and got == sent[:1]:
            # GitLab kept only the first id it was sent: this tier has one assignee per
            # issue. The human stays assigned; the claim rides on the label from now on.
            log.info("GitLab keeps one assignee per issue here; claims use the label alone")
            self.single_assignee = True
            return
        raise TrackerHttpError(
            422,
            f"GitLab did not assign {', '.join(missing)} (no access to the project?)",
            method="PUT",
            path=f"issues/{number}",
        )


@dataclass(frozen=True, slots=True)
class _Assigning:
    """An assignee write: the ids to send (``None``: no change), the seat accounts it
    adds, and the issue's ``updated_at`` (ms) as read right before it."""

    ids: list[int] | None
    added: list[str]
    read_ms: int
