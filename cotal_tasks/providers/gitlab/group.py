"""A GitLab group as one source: every project in it, read through one listing.

``GET /groups/:id/issues`` lists the issues of every project of the group and of its
subgroups (always: the endpoint has no parameter to leave them out), skipping archived
projects, with the same filters and ``updated_after`` as a project's listing, in offset
pages only. So the group is one source with one sync loop, one checkpoint and one health,
and an unchanged poll costs what one project's does, however many projects the group has:
one issue page and one merge-request page (``GET /groups/:id/merge_requests``).

Task ids stay ``group/project#iid``, the same as a ``projects = [...]`` endpoint's. The
sync numbers issues with one integer per source, and iids repeat across projects, so an
issue's number here is its project's stable id and its iid together (``number``). A
project's tasks are named by its path as first read (kept in the checkpoint, so a restart
and a write before the first poll know it); a project renamed inside the group keeps its
task ids. Everything but the listings goes to the project-level API of the issue's own
project (by its id): an issue read one by one, its evidence, write-back and its notes.

An issue is outside the source (``TrackedIssue.outside_source``, a left task's
``statusSource`` after ``out of scope:``) when its project is no longer in the group
(transferred out), sits in a subgroup while ``include_subgroups = false``, matches
``exclude_projects``, or (read one by one: the listing skips it) is archived. Such an
issue leaves the group's listing without changing, so the reconcile sweep finds it: an
unfinished task its listing of open issues no longer shows is read, and maps as having
left; one that left and is listed again is read, and comes back.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.gitlab import mapping
from cotal_tasks.providers.gitlab.client import GitLabClient
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.hosted.boundary import ItemBoundary, as_int
from cotal_tasks.providers.hosted.taskids import id_prefix, number_in, task_id
from cotal_tasks.providers.hosted.tracker import (
    Evidence,
    IssueGone,
    ListPage,
    NewIssue,
    Step,
    TrackedIssue,
    TrackerChange,
)

PROJECTS = "projects"  # the checkpoint's entry: project id -> the path its tasks carry
IID_BITS = 32  # GitLab's iids are 32-bit integers


def number(project_id: int, iid: int) -> int:
    """An issue's number in a group source: its project's id and its iid together."""
    return project_id << IID_BITS | iid


def split(issue_number: int) -> tuple[int, int]:
    """The project id and the iid a group source's issue number holds."""
    return issue_number >> IID_BITS, issue_number & ((1 << IID_BITS) - 1)


class GitLabGroupTracker(GitLabTracker):
    """The group's listings (``client`` is the group's), and one ``GitLabTracker`` per
    project of it for the rest."""

    def __init__(self, client: GitLabClient, config: GitLabConfig, boundary: ItemBoundary):
        super().__init__(client, config, boundary, config.location)
        self.known_id = None  # a group's id names no project's deliveries
        self.holds = self._holds
        # The group's full path, which an issue's project path must start with, asked of
        # GitLab once (``resolve``): a group named by its id, or renamed since the
        # config named it, is known by its path now.
        self.group_path: str | None = None
        self.paths: dict[int, str] = {}  # project id -> the path its task ids carry
        self._ids: dict[str, int] = {}  # task id prefix (casefolded) -> project id
        self._projects: dict[int, GitLabTracker] = {}
        self._archived: dict[int, tuple[float, bool]] = {}  # project id -> (read at, archived)
        self._creator: GitLabTracker | None = None

    # -- the projects, their paths and task ids ---------------------------------------------
    def know(self, saved: Any) -> None:
        """The paths a checkpoint kept (``{"<project id>": path}``)."""
        for pid, path in dict(saved or {}).items():
            if str(pid).isdigit() and isinstance(path, str) and path:
                self._name(int(pid), path)

    def _name(self, pid: int, path: str) -> None:
        """Name project ``pid``'s tasks by ``path``, unless they have a name already (a
        project renamed in the group keeps its task ids). A path another project's tasks
        carry (a renamed project's old name, given to a new one) is told apart by the
        new project's id."""
        if pid in self.paths:
            return
        if id_prefix(path).casefold() in self._ids:
            path = f"{path}~{pid}"
        self.paths[pid] = path
        self._ids[id_prefix(path).casefold()] = pid
        if (sub := self._projects.get(pid)) is not None:
            sub.name_path(path)

    def _learn(self, item: Mapping[str, Any]) -> int | None:
        """The project id of an issue (or merge request) read, its path learned."""
        pid = as_int(item.get("project_id"))
        path = mapping.path_of(item) or mapping.merge_request_path(item)
        if pid is not None and path is not None:
            self._name(pid, path)
        return pid

    def _project(self, pid: int) -> GitLabTracker:
        """Project ``pid``'s own tracker (its project-level API, by its id)."""
        sub = self._projects.get(pid)
        if sub is None:
            client = GitLabClient(self.client.http, str(pid), self.config.pagination)
            sub = GitLabTracker(client, self.config, self.boundary, str(pid))
            sub.single_assignee = self.single_assignee
            if pid in self.paths:
                sub.name_path(self.paths[pid])
            self._projects[pid] = sub
        return sub

    def number_of(self, task: str) -> int | None:
        prefix, sep, _ = task.rpartition("#")
        pid = self._ids.get(prefix.casefold()) if sep else None
        if pid is None:
            return None
        iid = number_in(self.paths[pid], task)
        return None if iid is None else number(pid, iid)

    def task_id_of(self, issue_number: int) -> str:
        pid, iid = split(issue_number)
        return task_id(self.paths.get(pid, str(pid)), iid)

    def _holds(self, pid: int | None, path: str | None) -> bool:
        """Whether a webhook delivery's project is one of the group's."""
        if pid is not None and pid in self.paths:
            return True
        known = path is not None and self.group_path is not None
        return known and self._outside_path(path or "") is None

    def numbers_named(self, pid: int | None, path: str | None, iids: set[int]) -> set[int]:
        """The issue numbers of ``iids`` of a delivery's project."""
        if pid is None:
            return set()  # the poll finds the change
        if path is not None:
            self._name(pid, path)
        return {number(pid, iid) for iid in iids}

    # -- inside the group or not ------------------------------------------------------------
    async def resolve(self) -> None:
        """The group's full path, asked of GitLab once (``GET /groups/:id``)."""
        if self.group_path is None:
            self.group_path = await self.client.group_path()

    def _outside_path(self, path: str) -> str | None:
        group = self.group_path
        if group is None:
            return None
        if not path.casefold().startswith(group.casefold() + "/"):
            return f"project {path} is not in group {group}"
        if not self.config.include_subgroups and "/" in path[len(group) + 1 :]:
            return f"project {path} is in a subgroup of {group}"
        excluded = self.config.exclude_projects
        if any(fnmatchcase(path.casefold(), glob.casefold()) for glob in excluded):
            return f"project {path} is excluded"
        return None

    def _outside(self, item: Mapping[str, Any]) -> str | None:
        path = mapping.path_of(item)
        return None if path is None else self._outside_path(path)

    async def _archived_now(self, pid: int, item: Mapping[str, Any]) -> str | None:
        """Whether the issue's project is archived (read at most once a poll interval,
        and once a reconcile sweep: the group's listing skips archived projects, so only
        an issue read one by one asks)."""
        now = time.monotonic()
        held = self._archived.get(pid)
        if held is None or now - held[0] > self.config.poll_interval_s:
            held = (now, await self.client.archived(pid))
            self._archived[pid] = held
        return f"project {mapping.path_of(item) or pid} is archived" if held[1] else None

    # -- the listings -----------------------------------------------------------------------
    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        """The group's listings; every page also keeps the projects' paths."""
        self.know(remembered.get(PROJECTS))
        await self.resolve()
        async for page in super().list_changed(cursor, remembered):
            kept = {str(pid): path for pid, path in self.paths.items()}
            yield dataclasses.replace(page, remember={**(page.remember or {}), PROJECTS: kept})

    def _key(self, item: dict[str, Any]) -> int | None:
        pid, iid = as_int(item.get("project_id")), as_int(item.get("iid"))
        return None if pid is None or iid is None else number(pid, iid)

    def _links_read(self, item: dict[str, Any]) -> bool:
        return super()._links_read(item) and self._outside(item) is None

    async def _evidence(
        self, item: dict[str, Any], count: int | None = None
    ) -> tuple[list[Evidence], bool]:
        pid = self._learn(item)
        if pid is None:
            return [], True  # not an issue: the boundary records it when it maps
        return await self._project(pid).evidence.read(item, count)

    def _mentioned(self, merge_request: dict[str, Any]) -> set[int]:
        pid = self._learn(merge_request)
        path = mapping.merge_request_path(merge_request)
        if pid is None or path is None:
            return set()
        return {number(pid, iid) for iid in mapping.mentioned_issues(path, merge_request)}

    def _tracked(self, item: Any, found: Any = (), why: str | None = None) -> TrackedIssue | None:
        pid = self._learn(item) if isinstance(item, dict) else None
        if pid is None:
            self.boundary.note("item-unmappable", "an item of the group's issue listing")
            return None
        issue = self._project(pid)._tracked(item, found)
        if issue is None:
            return None
        outside = why or self._outside(item)
        return dataclasses.replace(issue, number=number(pid, issue.number), outside_source=outside)

    async def open_numbers(self) -> tuple[set[int], int]:
        """The reconcile sweep's listing; what it reads next asks anew whether a project
        is archived (once a project for the sweep)."""
        self._archived.clear()
        items, requests = await self.client.open_issues()
        listed = {key for item in items if self._outside(item) is None and (key := self._key(item))}
        return listed, requests

    # -- one issue, by its project ----------------------------------------------------------
    async def fetch(self, issue_number: int) -> TrackedIssue | None:
        pid, iid = split(issue_number)
        await self.resolve()
        sub = self._project(pid)
        try:
            item = await sub.client.read_issue(iid)
        except IssueGone as exc:
            gone = mapping.gone(sub.path, iid, exc.fate)
            return dataclasses.replace(gone, number=issue_number)
        if not isinstance(item, dict):
            return None
        why = self._outside(item) or await self._archived_now(pid, item)
        found: list[Evidence] = []
        if why is None and self._links_read(item):
            found, _ = await sub.evidence.read(item)
        return self._tracked(item, found, why)

    async def create(self, issue: NewIssue) -> TrackedIssue:
        """The issue, made in ``create_project``; none configured: refused, nothing
        written."""
        where = self.config.create_project
        if where is None:
            raise ContractError(
                ErrorCode.FAILED_PRECONDITION,
                f"the endpoint reads GitLab group {self.path} and names no project to create "
                'tasks in. Set create_project = "group/project" (a project of the group) '
                "in its [endpoints.gitlab] section",
                outcome="not-executed",
            )
        if self._creator is None:
            client = GitLabClient(self.client.http, where, self.config.pagination)
            self._creator = GitLabTracker(client, self.config, self.boundary, where)
        created = await self._creator.create(issue)
        pid = self._creator.known_id
        if pid is None:
            return created
        self._name(pid, where)
        return dataclasses.replace(
            created,
            number=number(pid, created.number),
            task_id=task_id(self.paths[pid], created.number),
        )

    async def steps(self, issue_number: int, change: TrackerChange) -> list[Step]:
        pid, iid = split(issue_number)
        return await self._project(pid).steps(iid, change)

    async def apply(self, issue_number: int, change: TrackerChange) -> None:
        """The write, to the issue's own project; a tier of one assignee per issue, once
        one project shows it, holds for the group."""
        pid, iid = split(issue_number)
        sub = self._project(pid)
        try:
            await sub.apply(iid, change)
        finally:
            if sub.single_assignee and not self.single_assignee:
                self.single_assignee = True
                for other in self._projects.values():
                    other.single_assignee = True

    async def comment_marks(self, issue_number: int) -> set[str]:
        pid, iid = split(issue_number)
        return await self._project(pid).comment_marks(iid)
