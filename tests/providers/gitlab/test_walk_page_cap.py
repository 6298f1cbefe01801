"""A GitLab walk reads at most ``max_pages`` pages, however it pages.

Over offset pagination the walk asks each next page ``updated_after`` the last timestamp
read and steps by ``x-next-page`` through a run of one timestamp; neither is a ``Link``
URL, so the shared HTTP layer's ``Link`` count never saw them. The fake here answers
every issue page with a next page, and a page past the end with the last page again: a
server (or a proxy) that pages forever. The walk must stop at the cap with an error that
names the key, the cursor at the last page read, and a later poll must resume there.
"""

from __future__ import annotations

from pathlib import Path

from cotal_tasks.providers.hosted.boundary import as_ms
from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import (
    ISSUES,
    PROJECT,
    GitLabEndpoint,
    issue_pages,
    open_gitlab,
)
from tests.providers.hosted_support import poll_past_page_cap
from tests.support.fake_gitlab import FakeGitLab

CAP = 2


async def test_an_endless_x_next_page_chain_stops_at_the_page_cap(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """Before: the walk followed ``x-next-page`` (and its restarts) forever."""
    gitlab.keyset_supported = False
    gitlab.bulk_issues(PROJECT, 250)
    gitlab.endless_pages = ISSUES
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "bridge", presence=presence, max_pages=CAP
    ) as gl:
        await poll_past_page_cap(gl, lambda: len(issue_pages(gitlab)), CAP)
        # The cursor is the newest issue read (page 2 ends with the 199th), never beyond.
        read = await iids_of(gl)
        assert read == set(range(1, 200))
        cursor = (await gl.sync.checkpoint())["cursor"]
        assert as_ms(cursor) == gitlab.issue(PROJECT, 199).updated_ms

        gitlab.endless_pages = None
        await gl.poll()  # resumes from the checkpoint
        assert await iids_of(gl) == set(range(1, 251))


async def iids_of(gl: GitLabEndpoint) -> set[int]:
    return {int(str(t["taskId"]).rsplit("#", 1)[1]) for t in await gl.all_tasks()}


async def test_an_endless_all_pages_read_stops_at_the_page_cap(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """Before: an issue's notes (read for its evidence, every page) paged forever."""
    iid = int(gitlab.add_issue(PROJECT, "Mentioned everywhere")["iid"])
    gitlab.add_note(PROJECT, iid, "mentioned in commit abc123")
    notes = f"{ISSUES}/{iid}/notes"
    gitlab.endless_pages = notes
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "bridge", presence=presence, max_pages=CAP
    ) as gl:
        await poll_past_page_cap(gl, lambda: len(gitlab.calls("GET", notes)), CAP)
        assert (await gl.sync.checkpoint()).get("cursor") is None  # its page was not taken

        gitlab.endless_pages = None
        await gl.poll()
        assert await iids_of(gl) == {iid}
