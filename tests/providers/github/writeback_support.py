"""What the GitHub write-back tests share: a seat without an account, the writes a fake
took, issues synced in, and the quiet echo of the bridge's own write."""

from __future__ import annotations

from typing import Any

from tests.conftest import seat
from tests.providers.github._support import BUILDER, REPO, GitHubEndpoint, task_id
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
WORKER = seat("worker", 4)  # a seat the directory does not map: no GitHub account
SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"


def writes(fake: FakeGitHub, since: int) -> list[tuple[str, str, Any]]:
    return [(r.method, r.path, unmarked(r.body)) for r in fake.requests[since:] if r.is_write]


async def synced(gh: GitHubEndpoint, *titles: str) -> None:
    for title in titles:
        gh.fake.add_issue(REPO, title)
        gh.fake.advance(10)
    await gh.poll()
    await gh.poll()  # settle the conditional request


async def assert_echo_is_quiet(gh: GitHubEndpoint, number: int) -> Json:
    """The next poll re-reads the issue the bridge wrote and changes nothing."""
    seq, record = await gh.seq(), await gh.get(number)
    gh.fake.advance(5)
    report = await gh.poll()
    assert report.issues >= 1, "the write did not move the issue's updated_at"
    assert report.changed == 0
    assert await gh.seq() == seq
    assert await gh.get(number) == record
    return record


async def claimed_by_builder(gh: GitHubEndpoint) -> Json:
    await synced(gh, "Ship the parser")
    return await gh.client.claim(BUILDER, task_id(1))
