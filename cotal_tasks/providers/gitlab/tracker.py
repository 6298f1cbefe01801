"""GitLab as a ``Tracker``: list, fetch with evidence, create, and apply planned writes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cotal_tasks.providers.gitlab import mapping
from cotal_tasks.providers.gitlab.client import GitLabClient
from cotal_tasks.providers.hosted.config import GitLabConfig
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.tracker import (
    Evidence,
    ListPage,
    NewIssue,
    TrackedIssue,
    TrackerChange,
    TrackerRefused,
    epoch_ms,
)

log = logging.getLogger(__name__)

MR_MARK = "merge_requests"


def _iso(stamp: datetime) -> str:
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class GitLabTracker:
    name = "GitLab"

    def __init__(self, client: GitLabClient, config: GitLabConfig) -> None:
        self.client = client
        self.config = config
        # The project's path names its tasks; a numeric project id learns it from issues.
        self.path: str | None = config.project if "/" in config.project else None

    def _path_from(self, issue: dict[str, Any]) -> str:
        if self.path is None:
            self.path = mapping.path_of(issue) or self.config.project
        return self.path

    def number_of(self, task_id: str) -> int | None:
        return mapping.iid_of(self.path or self.config.project, task_id)

    def _since(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        at = datetime.fromisoformat(cursor.replace("Z", "+00:00"))
        return _iso(at - timedelta(seconds=self.config.overlap_s))

    async def list_changed(
        self, cursor: str | None, etag: tuple[str, str] | None, marks: Mapping[str, str]
    ) -> AsyncIterator[ListPage]:
        since = self._since(cursor)
        highest = cursor
        first = True
        read: dict[int, str] = {}  # iid -> updated_at read in this walk
        evidenced: dict[int, int] = {}  # iid -> its updated_at (ms) when its evidence was read
        async for response in self.client.issue_pages(since):
            issues: list[TrackedIssue] = []
            changed: set[int] = set()
            for item in response.json():
                stamp = item.get("updated_at")
                iid = int(item["iid"])
                if read.get(iid) == stamp:
                    continue  # the seam of two offset pages: read a moment ago
                read[iid] = str(stamp)
                if stamp and (highest is None or epoch_ms(stamp) > epoch_ms(highest)):
                    highest = stamp
                found: list[Evidence] = []
                # A changed issue with merge requests has its evidence read: a link made
                # in GitLab notes it on the issue, which moves its updated_at.
                fresh = cursor is None or epoch_ms(stamp) > epoch_ms(cursor)
                count = item.get("merge_requests_count")
                if fresh and (not isinstance(count, int) or count > 0):  # unknown: look
                    found = await self._evidence(item)
                    changed.add(iid)
                    evidenced[iid] = epoch_ms(stamp)
                issues.append(mapping.tracked(self._path_from(item), item, found))
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
        swept = marks.get(MR_MARK)
        newest = swept
        path = self.path or self.config.project
        async for response in self.client.merge_request_pages(self._since(swept)):
            linked: set[int] = set()
            for merge_request in response.json():
                stamp = merge_request.get("updated_at")
                if swept is None or epoch_ms(stamp) > epoch_ms(swept):
                    named = mapping.mentioned_issues(path, merge_request)
                    # An issue whose evidence this walk read after the merge request's
                    # last change already shows it.
                    linked |= {n for n in named if evidenced.get(n, -1) < epoch_ms(stamp)}
                if stamp and (newest is None or epoch_ms(stamp) > epoch_ms(newest)):
                    newest = stamp
            yield ListPage(
                (),
                frozenset(linked),
                cursor=highest,
                listing=False,
                marks={MR_MARK: newest} if newest else None,
            )

    async def recent(self, count: int) -> list[TrackedIssue]:
        items = await self.client.recent_issues(min(count, 100))
        return [mapping.tracked(self._path_from(item), item) for item in items]

    async def fetch(self, number: int) -> TrackedIssue | None:
        issue = await self.client.get_issue(number)
        if issue is None:
            return None
        return mapping.tracked(self._path_from(issue), issue, await self._evidence(issue))

    async def _evidence(self, issue: dict[str, Any]) -> list[Evidence]:
        """Every merge request related to or closing the issue (all pages), each read
        in its own project for its head pipeline, attributed to where it lives."""
        iid = int(issue["iid"])
        own = self._path_from(issue)
        closing = [mr for mr in await self.client.closed_by(iid) if isinstance(mr, dict)]
        related = await self.client.related_merge_requests(iid)
        closers = {_key(mr) for mr in closing}
        merge_requests = {
            _key(mr): mr for mr in [*closing, *related] if isinstance(mr, dict) and all(_key(mr))
        }
        found: list[Evidence] = []
        for key, merge_request in merge_requests.items():
            project_id, mr_iid = key
            if "head_pipeline" not in merge_request:
                try:
                    elsewhere = project_id if project_id != issue.get("project_id") else None
                    merge_request = await self.client.merge_request(mr_iid, elsewhere)
                except TrackerHttpError as exc:
                    log.info("merge request not readable (%s); evidence without its pipeline", exc)
            if not isinstance(merge_request, dict):
                continue  # an answer of another shape: this merge request says nothing
            source_path = None
            source_id = merge_request.get("source_project_id")
            if isinstance(source_id, int) and source_id != merge_request.get("project_id"):
                fork = await self.client.project_path(source_id)
                source_path = fork or f"project {source_id}"  # never the issue's own
            found += mapping.merge_request_evidence(
                merge_request, closed_it=key in closers, own_path=own, source_path=source_path
            )
        return found

    async def create(self, issue: NewIssue) -> TrackedIssue:
        payload: dict[str, Any] = {"title": issue.title}
        if issue.body is not None:
            payload["description"] = issue.body
        if issue.labels:
            payload["labels"] = ",".join(issue.labels)
        created = await self.client.create_issue(payload)
        return mapping.tracked(self._path_from(created), created)

    async def apply(self, number: int, change: TrackerChange) -> None:
        applied: list[str] = []
        try:
            update: dict[str, Any] = {}
            if change.assign or change.unassign:
                current = await self.client.get_issue(number)
                if current is None:
                    raise TrackerHttpError(404, "the issue is gone", method="GET", path=str(number))
                held = {u["username"]: int(u["id"]) for u in current.get("assignees") or ()}
                for username in change.unassign:
                    held.pop(username, None)
                for username in change.assign:
                    held[username] = await self.client.user_id(username)
                update["assignee_ids"] = sorted(held.values())
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
                result = await self.client.update_issue(number, update)
                usernames = {u.get("username") for u in result.get("assignees") or ()}
                missing = [name for name in change.assign if name not in usernames]
                if missing:
                    raise TrackerHttpError(
                        422,
                        f"GitLab did not assign {', '.join(missing)} (no access to the project?)",
                        method="PUT",
                        path=f"issues/{number}",
                    )
                applied.append("update")
            if change.comment:
                if applied and self.config.mutation_spacing_s:
                    await asyncio.sleep(self.config.mutation_spacing_s)
                await self.client.note(number, change.comment)
                applied.append("note")
        except TrackerHttpError as exc:
            raise TrackerRefused(exc, tuple(applied)) from exc


def _key(merge_request: Mapping[str, Any]) -> tuple[int, int]:
    """A merge request's identity across projects: (project id, iid)."""
    project_id, iid = merge_request.get("project_id"), merge_request.get("iid")
    return (project_id if isinstance(project_id, int) else 0, iid if isinstance(iid, int) else 0)
