"""Issues that leave a GitLab project without changing anything a poll lists: a deleted
issue answers 404 when it is read one by one, and is dropped then (``test_hosted_sync``);
the reconcile sweep (every ``reconcile_interval_s``) lists the open issues and reads each
mirrored unfinished task whose issue is not among them. Unchanged polls between sweeps
keep their two requests."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.providers.gitlab._support import (
    ISSUES,
    PROJECT,
    GitLabEndpoint,
    gitlab_mesh,
    open_gitlab,
)
from tests.providers.hosted_support import add_issues
from tests.support.fake_gitlab import FakeGitLab

HOUR_S = 3600


async def five_issues_mirrored(gl: GitLabEndpoint) -> None:
    add_issues(gl.fake, PROJECT, 5, spacing_s=60)
    gl.fake.close_issue(PROJECT, 5)
    await gl.poll()


async def test_the_reconcile_sweep_finds_a_deleted_issue_on_its_cadence(
    gl: GitLabEndpoint,
) -> None:
    fake = gl.fake
    gl.sync_on_tracker_time()
    await five_issues_mirrored(gl)  # the import starts the sweep's clock
    fake.delete_issue(PROJECT, 3)

    for _ in range(3):  # unchanged polls before the sweep is due: the two listings each
        fake.advance(600)  # (past merge_requests_interval_s: the merge requests are read)
        mark = len(fake.requests)
        report = await gl.poll()
        assert len(fake.requests) - mark == 2
        assert not report.reconciled
    assert (await gl.get(3))["status"] == "open"

    fake.advance(HOUR_S)
    mark = len(fake.requests)
    report = await gl.poll()

    sweep = fake.requests[mark + 2 :]
    assert [(r.path, r.status) for r in sweep] == [
        (ISSUES, 200),  # the open issues: #1, #2, #4 (#5 is closed, its task done)
        (f"{ISSUES}/3", 404),  # the one unfinished task not listed
        (ISSUES, 200),  # the project's issues still read: #3 was deleted
    ]
    assert sweep[0].query["state"] == "opened"
    assert (report.reconciled, report.sweep_requests, report.swept) == (True, 1, 1)
    assert report.changed == 1
    gone = await gl.get(3)
    assert (gone["status"], gone["statusSource"]) == ("dropped", "deleted")
    assert (await gl.get(5))["status"] == "done"

    fake.advance(60)
    mark = len(fake.requests)
    report = await gl.poll()
    assert len(fake.requests) - mark == 1  # the issues; the next sweep is an hour away
    assert not report.reconciled


async def test_a_sweep_of_many_open_issues_reads_only_the_missing(gl: GitLabEndpoint) -> None:
    """250 open issues: the sweep lists them in ceil(250 / 100) requests and reads only
    the two that are gone."""
    fake = gl.fake
    gl.sync_on_tracker_time()
    fake.bulk_issues(PROJECT, 250)
    await gl.poll()
    fake.delete_issue(PROJECT, 17)
    fake.delete_issue(PROJECT, 230)
    fake.advance(HOUR_S + 1)

    report = await gl.poll()

    assert (report.sweep_requests, report.swept) == (3, 2)
    for iid in (17, 230):
        record = await gl.get(iid)
        assert (record["status"], record["statusSource"]) == ("dropped", "deleted")


async def test_no_sweep_when_the_interval_is_zero(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "b", reconcile_interval_s=0) as gl:
        gl.sync_on_tracker_time()
        await five_issues_mirrored(gl)
        gl.fake.delete_issue(PROJECT, 3)
        gl.fake.advance(10 * HOUR_S)
        mark = len(gl.fake.requests)

        report = await gl.poll()

        assert len(gl.fake.requests) - mark == 2
        assert not report.reconciled
        assert (await gl.get(3))["status"] == "open"


async def test_the_sweep_cost_shows_in_metrics(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    add_issues(gitlab, PROJECT, 3)
    async with gitlab_mesh(tmp_path, gitlab, gitlab_url) as mesh:  # past its first sync
        clock = gitlab.clock
        mesh.hosted.sync.clock = lambda: int(clock.time() * 1000)
        gitlab.delete_issue(PROJECT, 2)
        gitlab.advance(HOUR_S + 1)

        report = await mesh.poll()

        assert (report.sweep_requests, report.swept) == (1, 1)
        assert mesh.bridge.http_url is not None
        async with httpx.AsyncClient(base_url=str(mesh.bridge.http_url)) as http:
            metrics = (await http.get("/metrics")).text
    values = {
        line.split("{", 1)[0]: line.rsplit(" ", 1)[1]
        for line in metrics.splitlines()
        if line.startswith("cotal_tasks_sync_reconcile_") and "_total{" in line
    }
    assert values == {
        "cotal_tasks_sync_reconcile_sweeps_total": "1.0",
        "cotal_tasks_sync_reconcile_listing_requests_total": "1.0",
        "cotal_tasks_sync_reconcile_reads_total": "1.0",
    }
