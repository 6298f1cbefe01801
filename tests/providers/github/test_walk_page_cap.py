"""A GitHub walk reads at most ``max_pages`` pages, its ``since`` restarts included.

The walk asks each next page ``since`` the last ``updated_at`` read: a fresh URL each
time, which the shared HTTP layer's ``Link`` count (it counts the next URLs a page
names) took for a new listing. Here the repository grows faster than the walk reads it
(a hundred and one new issues before every page is answered), so every page has a next
one: the walk must stop at the cap with an error that names the key, the cursor at the
last page read, and later polls must resume there and lose nothing.
"""

from __future__ import annotations

from pathlib import Path

from cotal_tasks.providers.hosted.boundary import as_ms
from tests.bridge._support import DictPresence
from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, list_requests, open_github
from tests.providers.github.test_sync_walk import mirrored_titles, tracker_titles
from tests.providers.hosted_support import poll_past_page_cap
from tests.support.fake_github import FakeGitHub

CAP = 4


async def test_since_restarts_stop_at_the_page_cap(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """Before: each restart from ``since`` counted as a first page; the walk never ended."""

    def grow(method: str, path: str, query: dict[str, str]) -> None:
        if method == "GET" and path == ISSUES:
            fake.advance(200)
            fake.bulk_issues(REPO, 101, step=1)

    fake.before_answer = grow
    async with open_github(
        fake, github_url, tmp_path / "bridge", presence=presence, max_pages=CAP
    ) as gh:
        await poll_past_page_cap(gh, lambda: len(list_requests(fake)), CAP)
        since = [r.query.get("since") for r in list_requests(fake)]
        assert len(set(since)) == CAP  # each page a restart from a newer timestamp
        # The cursor is the newest issue read, never one the walk did not list.
        read = await mirrored(gh)
        cursor = (await gh.checkpoint())["cursor"]
        assert as_ms(cursor) == max(fake.issue(REPO, n).updated_at for n in read) * 1000

        fake.before_answer = None
        await gh.poll()  # resumes from the checkpoint
        assert await mirrored_titles(gh) == tracker_titles(fake)


async def mirrored(gh: GitHubEndpoint) -> set[int]:
    return set(await mirrored_titles(gh))
