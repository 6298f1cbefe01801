"""The GitLab sync under GitLab's throttles, against the fake GitLab on loopback: a 429
waited out by ``RateLimit-Reset``, or a minute when neither header comes, and a wait
beyond the bound failing the poll, which the next one resumes from the checkpoint without
losing evidence. One waited out by ``Retry-After`` is in ``test_hosted_sync``.

Retry waits run on virtual time (``VirtualTime``: a wait moves the fake's clock so its
throttle window really resets).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.providers.hosted.http import RateLimited
from tests.providers.gitlab._support import (
    ISSUES,
    PROJECT,
    GitLabEndpoint,
    issue_pages,
    open_gitlab,
)
from tests.support.fake_gitlab import FakeGitLab


async def test_a_429_without_retry_after_waits_for_ratelimit_reset(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    fake = gitlab
    fake.bulk_issues(PROJECT, 150)
    async with open_gitlab(fake, gitlab_url, tmp_path / "b", commit_mentions=False) as gl:
        clock = gl.virtual_time()
        # A throttle the budget did not announce (a spent budget holds the next request
        # unsent: tests/providers/test_hosted_sync.py): its window resets in 45 s.
        fake.set_rate_limit(fake.rate_limit, reset_in=45)
        fake.fail_next(status=429, retry_after=None, path=ISSUES)
        report = await gl.poll()

    assert [r.status for r in issue_pages(fake)] == [429, 200, 200]
    (wait,) = clock.waits
    assert 45 <= wait <= 46  # until RateLimit-Reset, and a second more
    assert report.issues == 150


async def test_a_429_with_no_rate_limit_header_at_all_waits_a_minute(gl: GitLabEndpoint) -> None:
    """gitlab#365728: the headers are sometimes missing; the bridge then waits a minute."""
    fake = gl.fake
    fake.bulk_issues(PROJECT, 50)
    clock = gl.virtual_time()
    fake.omit_rate_limit_headers()
    fake.fail_next(status=429, retry_after=None, path=ISSUES)

    report = await gl.poll()

    assert [r.status for r in issue_pages(fake)] == [429, 200]
    assert clock.waits == [60.0]
    assert report.issues == 50


async def test_a_resumed_import_still_reads_the_evidence_it_had_not_swept(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    """Issue 50 is linked by a merge request made before issues 101 to 250 changed; the
    first poll is rate-limited on its third issue page, after the checkpoint moved past
    the merge request. The resumed import must end where an uninterrupted one does."""
    fake = gitlab
    fake.bulk_issues(PROJECT, 250)
    fake.advance(60)
    mr = fake.add_merge_request(PROJECT, "Fix 50", source_branch="fix-50", closes=[50])
    for iid in range(101, 251):
        fake.advance(1)
        fake.touch(PROJECT, iid)
    async with open_gitlab(
        fake, gitlab_url, tmp_path / "b", max_rate_limit_wait_s=60, commit_mentions=False
    ) as gl:
        gl.virtual_time()
        fake.set_rate_limit(2, reset_in=3600)
        with pytest.raises(RateLimited):
            await gl.poll()
        fake.advance(3600)
        await gl.poll()

        record = await gl.get(50)
        refs = {(e["kind"], e["ref"]) for e in record["evidence"]}
        assert ("review", str(mr["web_url"])) in refs
        assert ("branch", "fix-50") in refs
