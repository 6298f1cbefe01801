"""What the GitLab sync costs, against the fake GitLab served on loopback.

Requests are counted from the fake's request log and set beside their targets: an import
of N issues costs ceil(N/100) issue pages, over keyset pagination (GitLab 18.3+) and over
offset pagination (older servers, which ignore ``pagination=keyset``) alike, plus the
merge-request sweep (one page per 100 merge requests) and evidence reads only for the
issues a merge request names (the issue, ``closed_by``, ``related_merge_requests`` and
each related merge request). GitLab offers no conditional requests, so an unchanged poll
costs one (empty but for the overlap) issue page and one merge-request page. Time is the
median of a few keyset imports, each into a fresh SQLite mirror, beside a baseline
measured in the same run: walking the same issue pages with a bare ``httpx`` client, no
mapping and no mirror.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from cotal_tasks.bridge.app import open_endpoint
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.providers.hosted.config import GitLabConfig
from cotal_tasks.providers.hosted.sync import SyncReport
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, serve_fake_gitlab

PROJECT = "acme/bench"
ISSUES_PATH = "/api/v4/projects/acme%2Fbench/issues"
MRS_PATH = "/api/v4/projects/acme%2Fbench/merge_requests"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITLAB_TOKEN"
LINK_EVERY = 100  # one merge request closing one issue per this many issues
CHANGES = 10  # issues closed before the incremental poll


@dataclass
class Run:
    seconds: float
    report: SyncReport
    requests: list[RecordedRequest]


def build(issues: int) -> tuple[FakeGitLab, set[int]]:
    """The fake: ``issues`` issues (a tenth closed) and one merge request per
    ``LINK_EVERY`` of them, each closing one; returns it and the linked issue iids."""
    fake = FakeGitLab(projects=(PROJECT,))
    fake.bulk_issues(PROJECT, issues, closed_every=10)
    linked = set(range(LINK_EVERY // 2, issues + 1, LINK_EVERY))
    for iid in sorted(linked):
        fake.advance(60)  # a merge request a minute, each bumping the issue it names
        fake.add_merge_request(PROJECT, f"Fix #{iid}", source_branch=f"fix-{iid}", closes=[iid])
    return fake, linked


def endpoint(api_url: str) -> EndpointConfig:
    gitlab = GitLabConfig(
        project=PROJECT,
        api_url=api_url,
        token_env=TOKEN_ENV,
        mutation_spacing_s=0,
        max_retries=0,
    )
    return EndpointConfig(name="com.example.gitlab", provider="gitlab", gitlab=gitlab)


def bridge_config(api_url: str, data_dir: Path) -> tuple[BridgeConfig, EndpointConfig]:
    ep = endpoint(api_url)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    return config, ep


async def import_and_poll(
    fake: FakeGitLab, api_url: str, data_dir: Path, *, polls: bool
) -> tuple[Run, list[Run]]:
    """One import into a fresh mirror; with ``polls``, then the next three polls: right
    after the import, unchanged, and after ``CHANGES`` open issues were closed."""
    config, ep = bridge_config(api_url, data_dir)
    after: list[Run] = []
    async with open_endpoint(config, ep, serve=True) as opened:
        assert opened.hosted is not None
        sync = opened.hosted.sync
        fake.requests.clear()
        start = time.perf_counter()
        report = await sync.poll_once()
        first = Run(time.perf_counter() - start, report, list(fake.requests))
        for step in ("settle", "unchanged", "changed") if polls else ():
            if step == "changed":
                fake.advance(60)
                issues = fake.project(PROJECT).issues.values()
                for issue in [i for i in issues if i.state == "opened"][:CHANGES]:
                    fake.close_issue(PROJECT, issue.iid)
            fake.advance(1)
            fake.requests.clear()
            start = time.perf_counter()
            report = await sync.poll_once()
            after.append(Run(time.perf_counter() - start, report, list(fake.requests)))
    return first, after


async def raw_listing(fake: FakeGitLab, api_url: str) -> float:
    """The baseline: walk the same keyset issue pages with a bare client, parsing the JSON."""
    params = {
        "state": "all",
        "order_by": "updated_at",
        "sort": "asc",
        "per_page": "100",
        "pagination": "keyset",
    }
    path = ISSUES_PATH.removeprefix("/api/v4")
    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=api_url, headers=fake.auth_headers()) as client:
        url: str | None = api_url + path
        query: dict[str, str] | None = params
        while url is not None:
            response = await client.get(url, params=query)
            response.json()
            url, query = response.links.get("next", {}).get("url"), None
    return time.perf_counter() - start


def row(name: str, value: str, target: str = "") -> str:
    return f"  {name:<48} {value:>12}   {target}".rstrip()


def counts(requests: list[RecordedRequest]) -> tuple[int, int, int]:
    """(issue pages, merge-request pages, other reads) of one sync."""
    issue_pages = sum(1 for r in requests if r.matches("GET", ISSUES_PATH))
    mr_pages = sum(1 for r in requests if r.matches("GET", MRS_PATH))
    return issue_pages, mr_pages, len(requests) - issue_pages - mr_pages


async def main(issues: int = 10_000, rounds: int = 3) -> None:
    fake, linked = build(issues)
    os.environ[TOKEN_ENV] = fake.token
    merge_requests = len(linked)
    async with serve_fake_gitlab(fake) as api_url:
        with tempfile.TemporaryDirectory() as tmp:
            first, polls = await import_and_poll(fake, api_url, Path(tmp) / "k0", polls=True)
            runs = [first]
            for k in range(1, rounds):
                runs.append(
                    (await import_and_poll(fake, api_url, Path(tmp) / f"k{k}", polls=False))[0]
                )
            fake.keyset_supported = False
            offset, _ = await import_and_poll(fake, api_url, Path(tmp) / "offset", polls=False)
            fake.keyset_supported = True
        baseline = statistics.median([await raw_listing(fake, api_url) for _ in range(rounds)])

    print(
        f"\nGitLab sync against the fake GitLab on loopback (SQLite mirror), {issues:,} issues "
        f"and {merge_requests} merge requests each closing one:"
    )
    pages_target = f"target {math.ceil(issues / 100)} = ceil({issues:,} / 100)"
    mr_target = f"target {max(1, math.ceil(merge_requests / 100))}"
    evidence_target = f"target {4 * len(linked)} (issue, closed_by, related, MR per linked)"
    for name, run in (("keyset import", first), ("offset import", offset)):
        issue_pages, mr_pages, other = counts(run.requests)
        print(row(f"{name}: issue pages", f"{issue_pages}", pages_target))
        print(row(f"{name}: merge-request pages", f"{mr_pages}", mr_target))
        print(row(f"{name}: evidence requests", f"{other}", evidence_target))
        print(row(f"{name}: all requests", f"{len(run.requests)}"))
    settle, unchanged, changed = polls
    for name, poll, note in (
        ("first poll after the import", settle, "the overlap re-read"),
        ("unchanged poll", unchanged, "target 2: one issue page, one MR page (no 304)"),
        (f"poll after {CHANGES} issues closed", changed, f"{changed.report.changed} changed"),
    ):
        issue_pages, mr_pages, other = counts(poll.requests)
        detail = f"({issue_pages} issue, {mr_pages} MR, {other} other; {note})"
        print(row(name, f"{len(poll.requests)} request(s)", detail))
    seconds = statistics.median(run.seconds for run in runs)
    per_thousand = f"{seconds / issues * 1000:.2f} s per 1,000 issues"
    print(row(f"keyset import time, median of {rounds}", f"{seconds:.2f} s", per_thousand))
    print(row("offset import time, one run", f"{offset.seconds:.2f} s"))
    ratio = f"import cost x{seconds / baseline:.1f} of the baseline"
    print(row("raw keyset listing of the same pages (baseline)", f"{baseline:.2f} s", ratio))
    print(row("import rate", f"{issues / seconds:,.0f} issues/s"))
    assert all(run.report.issues == issues for run in (*runs, offset))
