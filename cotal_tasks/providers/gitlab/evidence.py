"""What links to a GitLab issue, read per issue: the commits its system notes say
mentioned it, and its related and closing merge requests with their head pipelines.

Each per-issue read is contained: GitLab refusing one (403, 404, 410, 422: a token that
may not read merge requests, merge requests turned off in the project, a feature a
release lacks) leaves that part out, counted under ``evidence-refused``; the issue is
mapped with the rest, and the poll goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from cotal_tasks.providers.gitlab import mapping
from cotal_tasks.providers.gitlab.client import GitLabClient
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.boundary import ItemBoundary, as_int
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.tracker import Evidence

log = logging.getLogger(__name__)

PART_REFUSALS = frozenset({403, 404, 410, 422})


class GitLabEvidence:
    def __init__(
        self,
        client: GitLabClient,
        config: GitLabConfig,
        boundary: ItemBoundary,
        path_from: Callable[[dict[str, Any]], str],
    ) -> None:
        self.client = client
        self.config = config
        self.boundary = boundary
        self.path_from = path_from

    async def read(
        self, issue: dict[str, Any], count: int | None = None
    ) -> tuple[list[Evidence], bool]:
        """What links to the issue: the commits its system notes say mentioned it, and,
        when it has merge requests (``count``, unknown: look) or a note says a merge
        request mentioned it, its merge-request evidence; and whether every part could
        be read (a part GitLab refuses is left out and counted)."""
        iid = as_int(issue.get("iid"))
        if iid is None:
            return [], True  # not an issue: the boundary records it when it maps
        own = self.path_from(issue)
        refused: list[str] = []
        found: list[Evidence] = []
        mentioned = False
        if self.config.commit_mentions:
            found, mentioned = await self._note_links(iid, own, refused)
        if count is None or count > 0 or mentioned:
            found += await self._merge_request_evidence(issue, iid, own, refused)
        return found, not refused

    async def _part(
        self, iid: int, what: str, read: Awaitable[list[Any]], refused: list[str]
    ) -> list[Any]:
        """One per-issue read of its links; GitLab refusing it costs that part only."""
        try:
            return await read
        except TrackerHttpError as exc:
            if exc.status not in PART_REFUSALS:
                raise
            refused.append(what)
            self.boundary.note("evidence-refused", f"issue {iid}", f"{what}: {exc.status}")
            return []

    async def _note_links(
        self, iid: int, own: str, refused: list[str]
    ) -> tuple[list[Evidence], bool]:
        """Commit evidence from the issue's notes (every page), each note through the
        boundary; and whether a note says a merge request mentioned the issue."""
        found: list[Evidence] = []
        mentioned = False
        for note in await self._part(iid, "notes", self.client.issue_notes(iid), refused):
            if not isinstance(note, dict):
                self.boundary.note("item-unmappable", f"a note of issue {iid}")
                continue
            ref = f"note {as_int(note.get('id'))} of issue {iid}"
            read = self.boundary.map(
                ref, mapping.note_evidence, note, own, reason="evidence-refused"
            )
            found += read or ()
            mentioned = mentioned or mapping.names_merge_request(note)
        return found, mentioned

    async def _merge_request_evidence(
        self, issue: dict[str, Any], iid: int, own: str, refused: list[str]
    ) -> list[Evidence]:
        """Every merge request related to or closing the issue (all pages), each read
        in its own project for its head pipeline, attributed to where it lives."""
        answered = await self._part(iid, "closed_by", self.client.closed_by(iid), refused)
        closing = [mr for mr in answered if isinstance(mr, dict)]
        related = await self._part(
            iid, "related_merge_requests", self.client.related_merge_requests(iid), refused
        )
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
            source_path = target_path = None
            if project_id != as_int(issue.get("project_id")) and (
                mapping.merge_request_path(merge_request) is None
            ):  # another project's, not saying which: never named as ours
                target_path = await self._path_of(project_id)
            source_id = merge_request.get("source_project_id")
            if isinstance(source_id, int) and source_id != merge_request.get("project_id"):
                source_path = await self._path_of(source_id)
            found += mapping.merge_request_evidence(
                merge_request,
                closed_it=key in closers,
                own_path=own,
                source_path=source_path,
                target_path=target_path,
            )
        return found

    async def _path_of(self, project_id: int) -> str:
        """Another project's path, or ``project N`` when GitLab does not say: never the
        issue's own."""
        return await self.client.project_path(project_id) or f"project {project_id}"


def _key(merge_request: Mapping[str, Any]) -> tuple[int, int]:
    """A merge request's identity across projects: (project id, iid)."""
    return (as_int(merge_request.get("project_id")) or 0, as_int(merge_request.get("iid")) or 0)
