"""A Jira walk reads at most ``max_pages`` search pages.

The search follows ``nextPageToken`` until ``isLast``; nothing counted those requests
but a fixed 10,000 pages, past which the walk ended quietly as if it were complete.
The fake here never says ``isLast`` and answers a token past the end with the last page
again: the walk must stop at the cap with an error that names the key, the cursor at the
last page read, and a later poll must resume there.
"""

from __future__ import annotations

from pathlib import Path

from cotal_tasks.providers.hosted.boundary import as_ms
from tests.bridge._support import DictPresence
from tests.providers.hosted_support import poll_past_page_cap
from tests.providers.jira._support import JiraEndpoint, open_jira, searches
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

CAP = 3
PAGE = 10


async def test_an_endless_next_page_token_chain_stops_at_the_page_cap(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    for k in range(1, 46):
        jira.add_issue(PROJECT, f"Issue {k}")
        jira.advance(61)  # each in its own minute
    jira.endless_pages = True
    async with open_jira(
        jira,
        jira_url,
        tmp_path / "bridge",
        presence=presence,
        max_pages=CAP,
        page_size=PAGE,
        remote_links=False,
    ) as jr:
        await poll_past_page_cap(jr, lambda: len(searches(jira)), CAP)
        # The cursor is the newest issue read (the third page ends with the 30th).
        assert await numbers_of(jr) == set(range(1, CAP * PAGE + 1))
        cursor = (await jr.sync.checkpoint())["cursor"]
        assert as_ms(cursor) == jira.issue(CAP * PAGE).updated_ms

        jira.endless_pages = False
        await jr.poll()  # resumes from the checkpoint
        assert await numbers_of(jr) == set(range(1, 46))


async def numbers_of(jr: JiraEndpoint) -> set[int]:
    return {int(str(t["taskId"]).rsplit("#", 1)[1]) for t in await jr.all_tasks()}
