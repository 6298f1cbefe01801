"""What the write path reads of the tracker around a write: the issue an earlier attempt
of a create made, what an earlier attempt of a write left undone, the issue before a
write (for the conflict rule) and after it (for the record the write commits)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cotal_tasks.core import ContractError, Outcome, Task
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.ledger import Intent
from cotal_tasks.providers.hosted.tracker import TrackedIssue, Tracker, TrackerChange
from cotal_tasks.providers.hosted.writeback import remaining

log = logging.getLogger(__name__)

Project = Callable[[TrackedIssue, Task | None], Awaitable[Task]]
ErrorOf = Callable[[Exception, Outcome], ContractError]


@dataclass(frozen=True)
class Rereads:
    tracker: Tracker
    project: Project  # an issue as the mapping reads it, given the record held for it
    error: ErrorOf  # a tracker failure in the contract's terms

    async def earlier_create(self, resume: Intent, marker: str) -> TrackedIssue | None:
        """The issue an earlier attempt of this create made, if it is still there (one
        deleted or moved since is no answer to this create: it is made again)."""
        try:
            if resume.number is not None:
                issue = await self.tracker.fetch(resume.number)
            else:
                issue = await self.tracker.find_marked(marker, resume.created_at)
        except TrackerHttpError as exc:
            raise self.error(exc, "unknown") from exc
        return None if issue is None or issue.gone else issue

    async def remaining(self, number: int, change: TrackerChange, marker: str) -> TrackerChange:
        """What an earlier attempt of this write left undone on the tracker."""
        try:
            issue = await self.tracker.fetch(number)
            commented = bool(change.comment) and await self.tracker.has_marked_comment(
                number, marker
            )
        except TrackerHttpError as exc:
            raise self.error(exc, "unknown") from exc
        return change if issue is None else remaining(change, issue, commented)

    async def current(self, number: int, read: Task) -> Task | None:
        """The issue before a write, as the mapping reads it (``None``: not an issue)."""
        try:
            tracked = await self.tracker.fetch(number)
        except TrackerHttpError as exc:
            raise self.error(exc, "not-executed") from exc
        return None if tracked is None else await self.project(tracked, read)

    async def read_over(self, number: int, final: Task) -> Task:
        """``final`` as the tracker holds it now (``final`` itself if it cannot be read)."""
        tracked = await self.reread(number)
        return final if tracked is None else await self.project(tracked, final)

    async def reread(self, number: int) -> TrackedIssue | None:
        try:
            return await self.tracker.fetch(number)
        except TrackerHttpError:
            log.warning("re-reading issue %s after the write failed; the next sync will", number)
            return None
