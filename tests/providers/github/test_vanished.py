"""Issues that leave a GitHub repository without changing anything a poll lists: a
transferred (301) or deleted (410) issue, and one that answers 404 while the repository's
issues still read, become ``dropped`` when read one by one (``test_hosted_sync``); the
reconcile sweep (every ``reconcile_interval_s``) lists the open issues and reads each
mirrored unfinished task whose issue is not among them. Unchanged polls between sweeps
keep their one request."""

from __future__ import annotations

from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint
from tests.providers.hosted_support import add_issues

HOUR_S = 3600


async def five_issues_mirrored(gh: GitHubEndpoint) -> None:
    add_issues(gh.fake, REPO, 5, spacing_s=60)
    gh.fake.close_issue(REPO, 5)
    await gh.poll()
    await gh.poll()  # past the overlap: the next unchanged poll is conditional


async def test_the_reconcile_sweep_finds_transferred_and_deleted_issues(
    gh: GitHubEndpoint,
) -> None:
    fake = gh.fake
    gh.sync_on_tracker_time()
    await five_issues_mirrored(gh)
    fake.add_pull(REPO, "Unrelated work", "Nothing named", head_ref="work")  # #6, open
    await gh.poll()
    await gh.poll()
    fake.transfer_issue(REPO, 1, "octo-org/elsewhere")
    fake.delete_issue(REPO, 2)

    for k in range(3):  # unchanged polls before the sweep is due: one request each
        fake.advance(600)
        mark = len(fake.requests)
        report = await gh.poll()
        # #1 and #2 left the page the conditional request asks for: the first answer is
        # that page (read, nothing on it changed), the next ones are 304
        assert [r.status for r in fake.requests[mark:]] == [200 if k == 0 else 304]
        assert not report.reconciled
    assert (await gh.get(1))["status"] == (await gh.get(2))["status"] == "open"

    fake.advance(HOUR_S)
    mark = len(fake.requests)
    report = await gh.poll()

    sweep = fake.requests[mark + 1 :]
    assert (sweep[0].path, sweep[0].query.get("state")) == (ISSUES, "open")
    fetched = sorted(r.path for r in sweep if r.path.startswith(f"{ISSUES}/"))
    assert fetched == [f"{ISSUES}/1", f"{ISSUES}/2"]  # not #3, #4 (listed), #5 (done)
    assert (report.reconciled, report.sweep_requests, report.swept) == (True, 1, 2)
    moved, deleted = await gh.get(1), await gh.get(2)
    assert (moved["status"], moved["statusSource"]) == ("dropped", "transferred")
    assert (deleted["status"], deleted["statusSource"]) == ("dropped", "deleted")
    assert (await gh.get(3))["status"] == "open"

    fake.advance(60)
    mark = len(fake.requests)
    report = await gh.poll()
    assert [r.status for r in fake.requests[mark:]] == [304]
    assert not report.reconciled
