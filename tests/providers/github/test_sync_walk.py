"""The GitHub walk loses nothing, whatever changes while it runs.

GitHub's issue listing pages by position. An issue edited while a walk is on page N
moves to the end of an ``updated``-ascending listing and every later issue shifts back a
place: by page number, page N+1 would start one issue late and the cursor would pass the
skipped issue for good. The fake runs an edit between two page requests (its
``before_answer`` hook), at every page position, and the mirror must end complete and
current within one further poll.
"""

from __future__ import annotations

import pytest

from tests.bridge._support import OPERATOR
from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, list_requests
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import Hook, before_nth_get

Json = dict[str, object]
ISSUES_COUNT = 450  # five list pages


def edit_on_page(fake: FakeGitHub, page: int, numbers: list[int]) -> Hook:
    """Retitle ``numbers`` just before the ``page``-th list request."""

    def edit() -> None:
        fake.advance(1)
        for number in numbers:
            fake.set_title(fake.issue(REPO, number), f"Edited during the walk {number}", "x")

    return before_nth_get(ISSUES, page, edit)


async def mirrored_titles(gh: GitHubEndpoint) -> dict[int, str]:
    pages = await gh.client.page_all("list-tasks", OPERATOR, {"limit": 100})
    tasks = [task for page in pages for task in page["tasks"]]
    return {int(str(t["taskId"]).rsplit("#", 1)[1]): str(t["title"]) for t in tasks}


def tracker_titles(fake: FakeGitHub) -> dict[int, str]:
    return {n: i.title for n, i in fake.repos[REPO].issues.items() if i.pull is None}


@pytest.mark.parametrize("page", [2, 3, 4, 5])
async def test_edits_between_two_page_requests_lose_no_issue(gh: GitHubEndpoint, page: int) -> None:
    """Five issues of the first pages are edited just before page ``page`` is asked: the
    five issues at the head of that page would shift back onto the page already read."""
    fake = gh.fake
    fake.bulk_issues(REPO, ISSUES_COUNT)
    fake.before_answer = edit_on_page(fake, page, [1, 2, 3, 4, 5])

    await gh.poll()
    fake.before_answer = None
    await gh.poll()  # one further poll

    assert len(list_requests(fake)) >= 5
    assert await mirrored_titles(gh) == tracker_titles(fake)


@pytest.mark.parametrize("page", [2, 3, 4, 5])
async def test_an_incremental_walk_loses_nothing_either(gh: GitHubEndpoint, page: int) -> None:
    """The same on a later poll that walks several pages: 450 issues changed since the
    import, five of them edited again while the walk runs."""
    fake = gh.fake
    fake.bulk_issues(REPO, ISSUES_COUNT)
    await gh.poll()
    fake.advance(60)
    for number in range(1, ISSUES_COUNT + 1):
        fake.advance(1)
        fake.set_title(fake.issue(REPO, number), f"Renamed {number}", "octocat")
    fake.before_answer = edit_on_page(fake, page, [10, 20, 30, 40, 50])

    await gh.poll()
    fake.before_answer = None
    await gh.poll()

    assert await mirrored_titles(gh) == tracker_titles(fake)


async def test_a_page_of_one_timestamp_is_stepped_through(gh: GitHubEndpoint) -> None:
    """250 issues updated in the same second (a bulk edit): ``since`` cannot step past
    them, so the walk follows page numbers within that second, and still ends."""
    fake = gh.fake
    for k in range(1, 251):
        fake.add_issue(REPO, f"Migrated {k}", updated_at=fake.clock.seconds)

    report = await gh.poll()

    assert report.issues == 250
    assert len(await mirrored_titles(gh)) == 250
    assert len(list_requests(fake)) <= 5


async def test_an_edit_inside_a_page_of_one_timestamp_loses_nothing(gh: GitHubEndpoint) -> None:
    """Stepping through one timestamp by page number, an edit of an issue already read
    shifts the rest of that timestamp back a place: the edited issue comes again at the
    end of the walk, newer, and the walk reads that timestamp once more."""
    fake = gh.fake
    for k in range(1, 251):
        fake.add_issue(REPO, f"Migrated {k}", updated_at=fake.clock.seconds)
    # Requests: the first page, the same ``since`` it ended on, then page 2 by number.
    fake.before_answer = edit_on_page(fake, 3, [5])

    await gh.poll()

    assert await mirrored_titles(gh) == tracker_titles(fake)
