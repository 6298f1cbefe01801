"""The GitHub sync under GitHub's secondary rate limits, against the fake GitHub on
loopback: their ``retry-after`` honoured. The primary limit, waited out until its reset or
beyond the bound failing the poll, is in ``test_hosted_sync`` with GitLab's.

Retry waits run on virtual time (``VirtualTime``: a wait moves the fake's clock so its
rate-limit window really resets) except where a test says it waits for real.
"""

from __future__ import annotations

import time

from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, list_requests


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
