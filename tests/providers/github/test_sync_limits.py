"""The GitHub sync under GitHub's rate limits, against the fake GitHub on loopback: the
primary limit waited out until its reset, the secondary limit's ``retry-after`` honoured,
and a wait beyond the bound failing the poll, which the next one resumes from the
checkpoint.

Retry waits run on virtual time (``VirtualTime``: a wait moves the fake's clock so its
rate-limit window really resets) except where a test says it waits for real.
"""

from __future__ import annotations

import time

from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, list_requests


async def test_primary_rate_limit_is_waited_out_and_the_page_read_again(
    gh: GitHubEndpoint,
) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 350)
    clock = gh.virtual_time()
    fake.set_rate_limit(6, reset_in=30)  # three list pages, each with its GraphQL read

    report = await gh.poll()

    listing = list_requests(fake)
    assert [r.status for r in listing] == [200, 200, 200, 403, 200]
    assert listing[3].query == listing[4].query  # the same page, not a restart
    assert "since" in listing[3].query
    (wait,) = clock.waits
    assert 30 <= wait <= 32  # until x-ratelimit-reset, and a second more
    assert (report.pages, report.issues) == (4, 350)
    assert len(await gh.all_tasks()) == 350


async def test_secondary_rate_limit_429_honours_retry_after(gh: GitHubEndpoint) -> None:
    """Waited for real: ``retry-after: 1`` costs about a second."""
    fake = gh.fake
    fake.bulk_issues(REPO, 150)
    fake.fail_next(status=429, retry_after=1, path=ISSUES)
    start = time.monotonic()

    report = await gh.poll()

    assert time.monotonic() - start >= 1.0
    listing = list_requests(fake)
    assert [r.status for r in listing] == [429, 200, 200]
    assert listing[0].query == listing[1].query
    assert (report.pages, report.issues) == (2, 150)


async def test_secondary_rate_limit_403_honours_retry_after(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 150)
    clock = gh.virtual_time()
    fake.fail_next(status=403, retry_after=7, path=ISSUES)

    report = await gh.poll()

    assert clock.waits == [7.0]
    assert [r.status for r in list_requests(fake)] == [403, 200, 200]
    assert (report.pages, report.issues) == (2, 150)
