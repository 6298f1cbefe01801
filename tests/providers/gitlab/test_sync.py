"""The GitLab sync against the fake GitLab on loopback: the import over keyset and over
offset pagination, the offset restart, the incremental poll, and the rule that nothing is
closed by absence. Request counts come from the fake's request log. Rate limits are in
``test_sync_limits.py``; retries and refusals, alike on both trackers, in
``tests/providers/test_hosted_sync.py``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.providers.gitlab._support import (
    ISSUES,
    MERGE_REQUESTS,
    PROJECT,
    GitLabEndpoint,
    check_mirror_matches,
    evidence_requests,
    fetched_iids,
    issue_pages,
    merge_request_pages,
    ms,
    newest_updated_at,
    open_gitlab,
    task_id,
)
from tests.support.fake_gitlab import FakeGitLab, iso

LISTING = {
    "state": "all",
    "order_by": "updated_at",
    "sort": "asc",
    "per_page": "100",
    "pagination": "keyset",
}


def link_three_merge_requests(fake: FakeGitLab) -> dict[int, int]:
    """MRs on issues 7 (closes, merged), 500 (mentions) and 990 (closes, still open);
    returns issue iid -> MR iid. Each linked issue gets a system note, so it is updated."""
    fake.advance(1)
    linked = {}
    linked[7] = int(
        fake.add_merge_request(PROJECT, "Fix 7", source_branch="fix-7", closes=[7])["iid"]
    )
    linked[500] = int(
        fake.add_merge_request(
            PROJECT, "Tidy", "Relates to #500", source_branch="see-500", mentions=[500]
        )["iid"]
    )
    linked[990] = int(
        fake.add_merge_request(PROJECT, "Fix 990", source_branch="fix-990", closes=[990])["iid"]
    )
    fake.advance(1)
    fake.merge_merge_request(PROJECT, linked[7])
    return linked


def evidence_paths(linked: dict[int, int], changed: Iterable[int] = ()) -> list[str]:
    """A changed issue costs its notes (one page here: the commits that mention it); one
    with merge requests also its closing and related merge requests (one page each here)
    and each merge request's detail."""
    paths = [f"{ISSUES}/{iid}/notes" for iid in changed]
    for iid, mr in linked.items():
        paths += [
            f"{ISSUES}/{iid}/closed_by",
            f"{ISSUES}/{iid}/related_merge_requests",
            f"{MERGE_REQUESTS}/{mr}",
        ]
    return sorted(paths)


# -- the import --------------------------------------------------------------------------


async def test_import_of_1000_issues_over_keyset_pagination(
    gl: GitLabEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """ceil(1000/100) = 10 issue pages, one merge-request page (the sweep that names the
    issues worth an evidence read), and evidence reads only for the three issues with
    merge requests (their ``merge_requests_count``), besides each issue's notes (the
    commits that mention it: one request per changed issue); the sweep names no issue again,
    since each was read after its merge request's last change."""
    fake = gl.fake
    fake.bulk_issues(PROJECT, 1000, closed_every=10)
    linked = link_three_merge_requests(fake)
    caplog.set_level(logging.DEBUG, logger="cotal_tasks")
    caplog.set_level(logging.DEBUG, logger="httpx")

    report = await gl.poll()

    pages = issue_pages(fake)
    assert len(pages) == math.ceil(1000 / 100) == 10
    assert [r.status for r in pages] == [200] * 10
    assert pages[0].query == LISTING  # no updated_after: the first import reads everything
    assert "cursor" not in pages[0].query
    assert all(r.query.get("pagination") == "keyset" and "cursor" in r.query for r in pages[1:])
    assert all("page" not in r.query for r in pages)  # keyset, never an offset
    sweep = merge_request_pages(fake)
    assert len(sweep) == 1
    assert {k: sweep[0].query[k] for k in ("order_by", "sort", "per_page")} == {
        "order_by": "updated_at",
        "sort": "asc",
        "per_page": "100",
    }
    assert sorted(r.path for r in evidence_requests(fake)) == evidence_paths(linked, range(1, 1001))
    assert len(fake.requests) == 10 + 1 + 1000 + 3 * len(linked)  # the notes: one per issue
    assert fake.writes == []

    assert (report.pages, report.issues, report.fetched) == (10, 1000, 0)
    await check_mirror_matches(gl, 1000)
    assert await gl.cursor() == iso(newest_updated_at(fake))
    assert "stale" not in await gl.client.list_tasks()
    assert fake.token not in caplog.text


async def test_import_of_1000_issues_over_offset_pagination(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    """A GitLab before 18.3 ignores ``pagination=keyset`` on project issues and answers with
    offset pagination. The walk never follows page numbers (an edit during the walk would
    shift issues past it): each next page asks from page 1 ``updated_after`` the last
    ``updated_at`` read, so the boundary issue comes twice and 1,000 issues take
    1 + ceil(900 / 99) = 11 pages; ``x-total-pages`` drives the progress."""
    fake = gitlab
    fake.keyset_supported = False
    fake.bulk_issues(PROJECT, 1000, closed_every=10)
    linked = link_three_merge_requests(fake)
    progress: list[tuple[int, int | None]] = []
    async with open_gitlab(fake, gitlab_url, tmp_path / "b") as gl:
        report = await gl.sync.poll_once(lambda done, total: progress.append((done, total)))

        pages = issue_pages(fake)
        assert len(pages) == 1 + math.ceil(900 / 99) == 11
        assert [r.status for r in pages] == [200] * 11
        assert all("page" not in r.query and "cursor" not in r.query for r in pages)
        after = [r.query["updated_after"] for r in pages[1:]]
        assert after == sorted(set(after))  # always further on
        assert len(merge_request_pages(fake)) == 1
        assert sorted(r.path for r in evidence_requests(fake)) == evidence_paths(
            linked, range(1, 1001)
        )
        assert len(fake.requests) == 11 + 1 + 1000 + 3 * len(linked)
        assert (report.pages, report.issues, report.fetched) == (11, 1000, 0)
        assert progress[:10] == [(page, 10) for page in range(1, 11)]
        assert progress[10] == (11, 11)
        await check_mirror_matches(gl, 1000)
        assert await gl.cursor() == iso(newest_updated_at(fake))


async def test_a_long_offset_listing_never_meets_the_offset_limit(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    """Against an offset limit of 300 records, over 700 issues: every page is a first
    page ``updated_after`` the last one read, so no request goes past the limit."""
    fake = gitlab
    fake.keyset_supported = False
    fake.max_offset = 300
    fake.bulk_issues(PROJECT, 700)
    async with open_gitlab(fake, gitlab_url, tmp_path / "b") as gl:
        report = await gl.poll()

        pages = issue_pages(fake)
        assert [r.status for r in pages] == [200] * len(pages)
        assert all(int(r.query.get("page", "1")) * 100 <= 300 for r in pages)
        assert all("updated_after" in r.query for r in pages[1:])
        assert report.issues == 700
        await check_mirror_matches(gl, 700)


# -- the incremental poll ----------------------------------------------------------------


async def test_incremental_poll_remaps_only_what_changed(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.bulk_issues(PROJECT, 250)
    await gl.poll()
    cursor = await gl.cursor()
    assert cursor == iso(newest_updated_at(fake))
    before = await gl.seq()
    fake.advance(60)
    issue10 = fake.issue(PROJECT, 10)
    issue10.title, issue10.updated_ms = "Crash on startup, with a stack trace", fake.clock.ms
    fake.set_labels(fake.issue(PROJECT, 20), ["bug", "workflow::blocked"])
    fake.close_issue(PROJECT, 30)
    fake.touch(PROJECT, 40)  # updated, but nothing the record carries changed
    fake.advance(1)
    fake.add_issue(PROJECT, "A new one")  # 251
    fake.add_issue(PROJECT, "Another new one")  # 252
    mark = len(fake.requests)

    report = await gl.poll()

    (page,) = issue_pages(fake, mark)
    assert cursor is not None
    assert page.query == {**LISTING, "updated_after": iso(ms(cursor) - 5000)}  # overlap
    (sweep,) = merge_request_pages(fake, mark)
    # The merge-request sweep keeps its own cursor; with no merge request seen yet it
    # has none, and its one (empty) page costs a single request.
    assert "updated_after" not in sweep.query
    # The notes of each changed issue (not of #250, which the overlap reads again).
    assert sorted(r.path for r in evidence_requests(fake, mark)) == evidence_paths(
        {}, sorted([10, 20, 30, 40, 251, 252])
    )
    # Read: #250 again (the overlap), #10, #20, #30, #40 and the two new issues.
    assert (report.issues, report.changed, report.fetched) == (7, 5, 0)
    assert await gl.seq() == before + 5
    for n, entries in {10: 2, 20: 2, 30: 2, 40: 1, 250: 1, 251: 1, 252: 1, 1: 1}.items():
        assert len(await gl.store.history(task_id(n))) == entries, n
    assert (await gl.get(10))["title"] == "Crash on startup, with a stack trace"
    record = await gl.get(20)
    assert (record["status"], record["statusSource"]) == ("open", "workflow::blocked")
    assert ((await gl.get(30))["status"], (await gl.get(30))["statusSource"]) == ("done", "closed")
    assert (await gl.get(251))["title"] == "A new one"
    assert await gl.cursor() == iso(fake.clock.ms)

    # And a poll with nothing new re-reads the overlap only, and maps nothing; the
    # merge requests wait for their cadence (merge_requests_interval_s).
    mark, seq = len(fake.requests), await gl.seq()
    report = await gl.poll()
    assert len(issue_pages(fake, mark)) == 1
    assert len(merge_request_pages(fake, mark)) == 0
    assert len(fake.requests) - mark == 1  # GitLab has no conditional requests
    assert report.changed == 0
    assert await gl.seq() == seq


async def test_a_merge_request_since_the_last_poll_brings_evidence(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.bulk_issues(PROJECT, 120)
    await gl.poll()
    fake.advance(60)
    mr = fake.add_merge_request(PROJECT, "Fix 5", source_branch="fix-5", closes=[5])
    fake.advance(60)
    sha = fake.merge_merge_request(PROJECT, int(mr["iid"]))
    mark = len(fake.requests)

    report = await gl.poll()

    # The merge request noted itself on #5, which moved #5's updated_at: the listing
    # brings it, and its evidence is read with it (nothing is fetched one by one).
    assert fetched_iids(fake, mark) == []
    assert report.fetched == 0
    assert len(fake.calls("GET", f"{ISSUES}/5/related_merge_requests")) == 1
    record = await gl.get(5)
    assert (record["status"], record["statusSource"]) == ("done", "closed")
    assert ("commit", sha) in {(e["kind"], e["ref"]) for e in record["evidence"]}


# -- single reads and project ids ----------------------------------------------------------------


async def test_a_missing_issue_is_read_once_and_not_retried(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.add_issue(PROJECT, "Only one")
    clock = gl.virtual_time()
    missing = await gl.tracker.fetch(99)
    assert missing is not None
    assert missing.gone == "deleted"  # a mirrored task becomes dropped; else no task
    # The 404 is not retried; the project's listing is asked once, to tell a deleted
    # issue from a project the token cannot read.
    assert [(r.path, r.status) for r in fake.requests] == [(f"{ISSUES}/99", 404), (ISSUES, 200)]
    assert clock.waits == []


async def test_a_numeric_project_id_still_names_tasks_by_path(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    fake = gitlab
    fake.bulk_issues(PROJECT, 3)
    numeric = str(fake.project(PROJECT).id)
    async with open_gitlab(fake, gitlab_url, tmp_path / "b", project=numeric) as gl:
        await gl.poll()
        assert sorted(t["taskId"] for t in await gl.all_tasks()) == [task_id(n) for n in (1, 2, 3)]
        listing = [r for r in fake.requests if r.path == f"/api/v4/projects/{numeric}/issues"]
        assert len(listing) == 1
