"""The GitHub sync against the fake GitHub on loopback: the import, incremental and
conditional polls, evidence from timelines, the rule that nothing is closed by absence,
and what the mapping does with odd titles and bodies. Request counts come from the fake's
request log. Rate limits are in ``test_sync_limits.py``; retries and refusals, alike on
both trackers, in ``tests/providers/test_hosted_sync.py``.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.providers.github._support import (
    ISSUES,
    REPO,
    GitHubEndpoint,
    evidence_requests,
    expected_status,
    fetched_issue_numbers,
    list_requests,
    open_github,
    task_id,
)
from tests.providers.hosted_support import add_issues
from tests.support.fake_github import FakeGitHub, iso, parse_iso

Json = dict[str, object]


# -- the initial import ------------------------------------------------------------------


async def test_initial_import_of_1000_entries_costs_eleven_list_pages(gh: GitHubEndpoint) -> None:
    """990 issues and 10 pull requests: GitHub's issues list holds 1,000 entries (pull
    requests are listed too). Each page after the first asks ``since`` the last
    ``updated_at`` read, so it reads that boundary issue again: 100 + 9 x 99 + 9 = 1,000
    entries in 11 list pages. Evidence costs one GraphQL request per page (the timelines
    of that page's issues, the links of its pull requests): nothing per issue."""
    fake = gh.fake
    fake.bulk_issues(REPO, 990, closed_every=10)
    linked = [7, 100, 101, 250, 499, 500, 640, 777, 990]
    pulls: dict[int, int] = {}
    for n in linked:
        pr = fake.add_pull(REPO, f"Fix #{n}", head_ref=f"fix-{n}", closes=[n])
        pulls[n] = int(pr["number"])
    # A pull request naming an issue of another repository links nothing here.
    fake.add_pull(REPO, "Upstream", "Fixes other-org/elsewhere#12", head_ref="upstream")
    progress: list[tuple[int, int | None]] = []

    report = await gh.sync.poll_once(lambda done, total: progress.append((done, total)))

    listing = list_requests(fake)
    assert len(listing) == 1 + math.ceil((1000 - 100) / 99) == 11
    assert [r.status for r in listing] == [200] * 11
    assert listing[0].query == {
        "state": "all",
        "sort": "updated",
        "direction": "asc",
        "per_page": "100",
    }
    assert all("page" not in r.query for r in listing)  # never a page number
    assert [r.query["since"] for r in listing[1:]] == sorted(
        {r.query["since"] for r in listing[1:]}
    )
    assert evidence_requests(fake) == []  # no issue, timeline or pull request read alone
    graph = fake.calls("POST", "/graphql")
    assert len(graph) == 11  # one per page
    assert len(fake.requests) == 11 + 11
    assert fake.writes == []

    # The linked issues were listed before their pull requests: the last page's request
    # reads their timelines again (the pull requests may be newer than the first read;
    # #990 was read in the same second as the first pull request, which may be later).
    assert (report.pages, report.issues, report.fetched) == (11, 990, len(linked))
    assert progress == [*((page, 10) for page in range(1, 11)), (11, 11)]
    tasks = await gh.all_tasks()
    ids = [str(t["taskId"]) for t in tasks]
    assert sorted(ids) == sorted(task_id(n) for n in range(1, 991))  # no pull request is a task
    by_number = {int(str(t["taskId"]).rsplit("#", 1)[1]): t for t in tasks}
    wrong = [
        (n, t["status"], t["statusSource"], expected_status(fake, n))
        for n, t in sorted(by_number.items())
        if (t["status"], t["statusSource"]) != expected_status(fake, n)
    ]
    assert wrong == []
    assert await gh.seq() == report.changed
    for n in linked:
        record = await gh.get(n)
        refs = {(e["kind"], e["ref"]) for e in record["evidence"]}
        assert refs == {
            ("review", f"https://github.com/{REPO}/pull/{pulls[n]}"),
            ("branch", f"fix-{n}"),
        }
    saved = await gh.sync.checkpoints.load(gh.sync.key)
    assert saved is not None
    assert saved["cursor"] == iso(max(i.updated_at for i in fake.repos[REPO].issues.values()))


async def test_incremental_poll_remaps_only_what_changed(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 250)
    await gh.poll()
    before = await gh.seq()
    fake.advance(60)
    fake.set_title(fake.issue(REPO, 10), "Crash on startup, now with a stack trace", "octocat")
    fake.add_labels(fake.issue(REPO, 20), ["blocked"], "octocat")
    fake.close_issue(REPO, 30)
    fake.touch(REPO, 40)  # updated, but nothing the record carries changed
    fake.advance(1)
    fake.add_issue(REPO, "A new one")
    fake.add_issue(REPO, "Another new one")
    mark = len(fake.requests)

    report = await gh.poll()

    (probe,) = list_requests(fake, mark)
    # The conditional probe of the last page said "changed", and is that page as it is
    # now: a listing from before the window (the overlap), so the walk starts from it.
    assert (probe.status, probe.if_none_match is not None) == (200, True)
    assert probe.query["since"] <= iso(fake.issue(REPO, 250).updated_at - 5)  # overlap
    assert evidence_requests(fake, mark) == []
    # Read: #10, #20, #30, #40, the two new issues, and the rest of the probed page
    # again (mapped, unchanged, their evidence not read).
    edited = {10, 20, 30, 40, 251, 252}
    again = {
        n
        for n, issue in fake.repos[REPO].issues.items()
        if n not in edited and iso(issue.updated_at) >= probe.query["since"]
    }
    assert 250 in again
    assert (report.pages, report.issues, report.changed) == (1, len(edited | again), 5)
    assert await gh.seq() == before + 5
    for n, entries in {10: 2, 20: 2, 30: 2, 40: 1, 250: 1, 251: 1, 252: 1, 1: 1}.items():
        assert len(await gh.store.history(task_id(n))) == entries, n
    assert (await gh.get(10))["title"] == "Crash on startup, now with a stack trace"
    assert ((await gh.get(20))["status"], (await gh.get(20))["statusSource"]) == (
        "open",
        "blocked",
    )
    assert (await gh.get(30))["status"] == "done"
    saved = await gh.sync.checkpoints.load(gh.sync.key)
    assert saved is not None
    assert saved["cursor"] == iso(fake.clock.seconds)


async def test_the_first_poll_after_an_import_is_already_conditional(gh: GitHubEndpoint) -> None:
    """The import's last page had room to spare, so its ETag was kept: any change would
    sort onto that page, and the next poll asks for it conditionally: one request, 304."""
    gh.fake.bulk_issues(REPO, 150)
    await gh.poll()
    seq, mark = await gh.seq(), len(gh.fake.requests)
    last_page = list_requests(gh.fake)[-1]

    report = await gh.poll()

    (request,) = gh.fake.requests[mark:]
    assert (request.status, request.if_none_match is not None) == (304, True)
    assert request.query == last_page.query  # the last page of the import's listing
    assert (report.pages, report.issues, report.changed, report.not_modified) == (0, 0, 0, True)
    assert await gh.seq() == seq


async def test_unchanged_poll_is_one_conditional_request_answered_304(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 150)
    await gh.poll()
    seq, mark, budget = await gh.seq(), len(fake.requests), fake.rate_remaining

    report = await gh.poll()

    (request,) = fake.requests[mark:]
    assert request.matches("GET", ISSUES, 304)
    assert request.if_none_match is not None
    assert report.not_modified
    assert (report.pages, report.issues, report.fetched) == (0, 0, 0)
    assert fake.rate_remaining == budget  # a 304 costs no primary rate limit
    assert await gh.seq() == seq
    assert "stale" not in await gh.client.list_tasks()

    # The ETag does not hide a change: the same conditional request now gets a 200, the
    # walk's first page (test_changed_poll).
    fake.advance(30)
    fake.close_issue(REPO, 3, "not_planned")
    mark = len(fake.requests)
    report = await gh.poll()
    probe, graph = fake.requests[mark:]
    assert (probe.status, probe.if_none_match is not None) == (200, True)
    assert graph.path == "/graphql"  # the closed issue's timeline
    assert report.changed == 1
    assert (await gh.get(3))["status"] == "dropped"


async def test_a_304_on_the_first_page_does_not_hide_later_pages(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.bulk_issues(REPO, 10)  # older issues, outside the overlap window
    for k in range(1, 151):  # a bulk edit: 150 issues updated in the same second
        fake.add_issue(REPO, f"Migrated {k}", updated_at=fake.clock.seconds)
    await gh.poll()
    await gh.poll()  # the overlap holds 2 pages now; the ETag is page 1's
    fake.advance(60)
    fake.close_issue(REPO, 3)  # the newest update: it sorts onto page 2

    report = await gh.poll()
    await gh.poll()

    assert (await gh.get(3))["status"] == "done"  # actual: open, poll after poll
    assert report.changed == 1  # actual: 0, the listing ended on page 1's 304


# -- evidence ----------------------------------------------------------------------------


async def test_timeline_pull_requests_and_commits_become_evidence(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.add_issue(REPO, "The parser crashes on empty input")  # 1
    fake.add_issue(REPO, "Unrelated")  # 2
    fake.advance(60)
    referenced = "3f786850e387550fdab836ed7e6dc881de23001b"
    fake.add_commit_reference(REPO, 1, referenced)
    fake.advance(60)
    pr = fake.add_pull(REPO, "Guard empty input", head_ref="fix/empty-input", closes=[1])  # 3
    fake.advance(60)
    merge_sha = fake.merge_pull(REPO, 3)
    mark = len(fake.requests)

    await gh.poll()

    record = await gh.get(1)
    assert (record["status"], record["statusSource"]) == ("done", "closed")
    entries = [(e["kind"], e["ref"]) for e in record["evidence"]]
    assert sorted(entries) == sorted(
        [
            ("commit", referenced),
            ("review", str(pr["html_url"])),
            ("branch", "fix/empty-input"),
            ("commit", merge_sha),
        ]
    )
    assert pr["html_url"] == f"https://github.com/{REPO}/pull/3"
    added = [e["addedAt"] for e in record["evidence"]]
    assert added == sorted(added)  # newest last
    assert record["evidence"][-1] == {
        "kind": "commit",
        "ref": merge_sha,
        "addedAt": fake.issue(REPO, 1).closed_at * 1000,  # type: ignore[operator]
    }
    assert (await gh.get(2))["evidence"] == []
    assert fetched_issue_numbers(fake, mark) == []  # the listing brought it
    assert fake.calls("GET", f"/repos/{REPO}/pulls/3") == []  # GraphQL names the branch
    assert len(fake.calls("POST", "/graphql")) == 1


async def test_only_the_newest_32_evidence_entries_are_kept(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    fake.add_issue(REPO, "A long-lived bug")
    shas = [f"{k:040x}" for k in range(1, 121)]
    for sha in shas:
        fake.advance(1)
        fake.add_commit_reference(REPO, 1, sha)
    fake.advance(1)
    pr = fake.add_pull(REPO, "Finally", head_ref="finally", closes=[1])

    await gh.poll()

    evidence = (await gh.get(1))["evidence"]
    assert len(evidence) == 32
    assert {(e["kind"], e["ref"]) for e in evidence} == {
        *(("commit", sha) for sha in shas[-30:]),
        ("review", str(pr["html_url"])),
        ("branch", "finally"),
    }
    # The newest 32 timeline items hold 33 distinct links: no older page is read.
    assert len(fake.calls("POST", "/graphql")) == 1


async def test_a_transferred_issue_does_not_stop_the_evidence_of_others(
    gh: GitHubEndpoint,
) -> None:
    fake = gh.fake
    add_issues(fake, REPO, 5)
    await gh.poll()
    fake.advance(60)
    fake.transfer_issue(REPO, 2, "octo-org/elsewhere")
    pr = fake.add_pull(REPO, "Fix both", head_ref="fix-both", closes=[2, 5])

    await gh.poll()  # expected: the poll succeeds; actual: TrackerHttpError(301)

    assert (await gh.get(5))["evidence"][0]["ref"] == pr["html_url"]
    assert await gh.store.freshness() is None


# -- mapping -----------------------------------------------------------------------------


async def test_bad_titles_and_bodies_are_handled_visibly_and_the_sync_goes_on(
    gh: GitHubEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    fake = gh.fake
    secret_title = "password=hunter2-correct-horse"
    secret_body = "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2ln"
    long_title = "Ünïcode " * 40  # 360 bytes
    long_body = "é" * 3000  # 6,000 bytes, every character two
    fake.add_issue(REPO, "Fine before")  # 1
    fake.add_issue(REPO, secret_title, "An ordinary body")  # 2
    fake.add_issue(REPO, "Secret body", secret_body)  # 3
    fake.add_issue(REPO, long_title, long_body)  # 4
    fake.add_issue(REPO, "Control\x07chars\x1b[0m here", "line one\r\nline two\x00")  # 5
    fake.add_issue(REPO, "Fine after")  # 6
    caplog.set_level(logging.WARNING)

    report = await gh.poll()

    assert (report.issues, report.changed) == (6, 6)
    assert (await gh.get(1))["title"] == "Fine before"
    assert (await gh.get(6))["title"] == "Fine after"
    two = await gh.get(2)
    assert two["title"] == f"(untitled {task_id(2)})"
    assert two["brief"] == "An ordinary body"
    three = await gh.get(3)
    assert three["title"] == "Secret body"
    assert "brief" not in three
    four = await gh.get(4)
    assert len(four["title"].encode()) <= 200
    assert four["title"].endswith("…")
    assert long_title.startswith(four["title"].removesuffix("…"))
    assert len(four["brief"].encode()) <= 4096
    assert long_body.startswith(four["brief"].removesuffix("…"))
    five = await gh.get(5)
    assert five["title"] == "Control chars [0m here"
    assert "\x00" not in five["brief"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for number, field in [(2, "title"), (3, "brief"), (4, "title"), (4, "brief")]:
        assert any(task_id(number) in w and field in w for w in warnings), (number, warnings)
    assert secret_title not in caplog.text
    assert "hunter2" not in caplog.text
    assert "eyJhbGciOiJIUzI1NiJ9" not in caplog.text


def _since_cursor(cursor: str, seconds: float) -> str:
    at = datetime.fromtimestamp(parse_iso(cursor), UTC) - timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_the_overlap_is_configurable(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    fake.bulk_issues(REPO, 10, step=20)
    async with open_github(fake, github_url, tmp_path / "b", overlap_s=45) as gh:
        await gh.poll()
        saved = await gh.checkpoint()
        # Forget the last page's ETag so the next poll lists instead of probing.
        await gh.sync.checkpoints.save(gh.sync.key, {**saved, "etag": None}, 0)
        mark = len(fake.requests)
        report = await gh.poll()
        (request,) = list_requests(fake, mark)
        assert request.query["since"] == _since_cursor(saved["cursor"], 45)
        assert report.issues == 3  # updated 20 s apart: 45 s re-reads the last three
        assert report.changed == 0
