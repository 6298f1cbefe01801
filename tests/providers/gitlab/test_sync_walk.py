"""The GitLab walk loses nothing, whatever changes while it runs.

Over offset pagination (GitLab before 18.3, and merge requests) an issue edited while the
walk is on page N moves to the end of an ``updated_at``-ascending listing and every later
issue shifts back a place: by page number, page N+1 would start one issue late and the
cursor would pass the skipped issue for good. The fake runs an edit between two page
requests (its ``before_answer`` hook), at every page position, over offset and keyset
pagination, and the mirror must end complete and current within one further poll.
"""

from __future__ import annotations

import pytest

from tests.providers.gitlab._support import ISSUES, PROJECT, GitLabEndpoint, issue_pages
from tests.support.fake_gitlab import FakeGitLab
from tests.support.fake_tracker import Hook, before_nth_get

ISSUES_COUNT = 450  # five issue pages


def edit_on_page(fake: FakeGitLab, page: int, iids: list[int]) -> Hook:
    """Retitle ``iids`` just before the ``page``-th issue page request."""

    def edit() -> None:
        fake.advance(1)
        for iid in iids:
            issue = fake.issue(PROJECT, iid)
            issue.title, issue.updated_ms = f"Edited during the walk {iid}", fake.clock.ms

    return before_nth_get(ISSUES, page, edit)


async def mirrored_titles(gl: GitLabEndpoint) -> dict[int, str]:
    return {int(str(t["taskId"]).rsplit("#", 1)[1]): str(t["title"]) for t in await gl.all_tasks()}


def tracker_titles(fake: FakeGitLab) -> dict[int, str]:
    return {iid: issue.title for iid, issue in fake.project(PROJECT).issues.items()}


@pytest.mark.parametrize("keyset", [False, True], ids=["offset", "keyset"])
@pytest.mark.parametrize("page", [2, 3, 4, 5])
async def test_edits_between_two_page_requests_lose_no_issue(
    gl: GitLabEndpoint, page: int, keyset: bool
) -> None:
    fake = gl.fake
    fake.keyset_supported = keyset
    fake.bulk_issues(PROJECT, ISSUES_COUNT)
    fake.before_answer = edit_on_page(fake, page, [1, 2, 3, 4, 5])

    await gl.poll()
    fake.before_answer = None
    fake.advance(1)
    await gl.poll()  # one further poll

    assert len(issue_pages(fake)) >= 5
    assert await mirrored_titles(gl) == tracker_titles(fake)


@pytest.mark.parametrize("page", [2, 3, 4, 5])
async def test_an_incremental_offset_walk_loses_nothing_either(
    gl: GitLabEndpoint, page: int
) -> None:
    fake = gl.fake
    fake.keyset_supported = False
    fake.bulk_issues(PROJECT, ISSUES_COUNT)
    await gl.poll()
    fake.advance(60)
    for iid in range(1, ISSUES_COUNT + 1):
        fake.advance(1)
        issue = fake.issue(PROJECT, iid)
        issue.title, issue.updated_ms = f"Renamed {iid}", fake.clock.ms
    fake.before_answer = edit_on_page(fake, page, [10, 20, 30, 40, 50])

    await gl.poll()
    fake.before_answer = None
    fake.advance(1)
    await gl.poll()

    assert await mirrored_titles(gl) == tracker_titles(fake)


async def test_a_page_of_one_timestamp_is_stepped_through(gl: GitLabEndpoint) -> None:
    """250 issues updated in the same millisecond (a bulk edit) over offset pages:
    ``updated_after`` cannot step past them, so the walk follows page numbers there."""
    fake = gl.fake
    fake.keyset_supported = False
    for k in range(1, 251):
        fake.add_issue(PROJECT, f"Migrated {k}", updated_at=fake.clock.ms / 1000)

    report = await gl.poll()

    assert report.issues == 250
    assert len(await gl.all_tasks()) == 250
    assert len(issue_pages(fake)) <= 5


async def test_an_edit_inside_a_page_of_one_timestamp_loses_nothing(gl: GitLabEndpoint) -> None:
    """Stepping through one timestamp by page number, an edit of an issue already read
    shifts the rest of that timestamp back a place: the edited issue comes again at the
    end of the walk, newer, and the walk reads that timestamp once more."""
    fake = gl.fake
    fake.keyset_supported = False
    for k in range(1, 251):
        fake.add_issue(PROJECT, f"Migrated {k}", updated_at=fake.clock.ms / 1000)
    # Requests: the first page, the same timestamp it ended on, then page 2 by number.
    fake.before_answer = edit_on_page(fake, 3, [5])

    await gl.poll()

    assert await mirrored_titles(gl) == tracker_titles(fake)
