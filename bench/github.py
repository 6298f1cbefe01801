"""What the GitHub sync costs, against the fake GitHub served on loopback.

Requests are counted from the fake's request log and set beside their targets: an
initial import of N issues costs ceil(listed/100) list pages (GitHub's issues list also
lists pull requests) plus evidence requests for the issues a pull request links and for
no other; an unchanged poll costs one conditional request answered 304. Time is the
median of a few full imports, each into a fresh SQLite mirror, beside a baseline
measured in the same run: walking the same list pages with a bare ``httpx`` client, no
mapping and no mirror.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from cotal_tasks.bridge.app import open_endpoint
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.providers.hosted.config import GitHubConfig
from cotal_tasks.providers.hosted.sync import SyncReport
from tests.support.fake_github import FakeGitHub, RecordedRequest, serve_fake_github

REPO = "octo-org/bench"
LIST_PATH = f"/repos/{REPO}/issues"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITHUB_TOKEN"
LINK_EVERY = 100  # one pull request linking one issue per this many issues
CHANGES = 10  # issues closed before the incremental poll


@dataclass
class Import:
    seconds: float
    report: SyncReport
    requests: list[RecordedRequest]


def build(issues: int) -> tuple[FakeGitHub, set[int], int]:
    """The fake: ``issues`` issues (a tenth closed) and one pull request per
    ``LINK_EVERY`` of them, each closing one; returns it, the linked issue numbers and the
    number of timeline pages those issues have."""
    fake = FakeGitHub(repos=(REPO,))
    fake.bulk_issues(REPO, issues, closed_every=10)
    linked = set(range(LINK_EVERY // 2, issues + 1, LINK_EVERY))
    for number in sorted(linked):
        # Pull requests opened over time, as in a real repository: a full page of them
        # updated within one overlap window (5 s) would keep every poll a plain listing.
        fake.advance(60)
        fake.add_pull(REPO, f"Fix #{number}", head_ref=f"fix-{number}", closes=[number])
    timeline_pages = sum(max(1, math.ceil(len(fake.issue(REPO, n).timeline) / 100)) for n in linked)
    return fake, linked, timeline_pages


def endpoint(api_url: str) -> EndpointConfig:
    github = GitHubConfig(
        repository=REPO,
        api_url=api_url,
        token_env=TOKEN_ENV,
        mutation_spacing_s=0,
        max_retries=0,
    )
    return EndpointConfig(name="com.example.github", provider="github", github=github)


async def import_once(fake: FakeGitHub, api_url: str, data_dir: Path) -> Import:
    """One initial import into a fresh mirror under ``data_dir``."""
    ep = endpoint(api_url)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    async with open_endpoint(config, ep, serve=True) as opened:
        assert opened.hosted is not None
        fake.requests.clear()
        start = time.perf_counter()
        report = await opened.hosted.sync.poll_once()
        seconds = time.perf_counter() - start
        return Import(seconds, report, list(fake.requests))


@dataclass
class Poll:
    requests: list[RecordedRequest]
    report: SyncReport


async def polls_after(fake: FakeGitHub, api_url: str, data_dir: Path, changes: int) -> list[Poll]:
    """The next three polls over an imported mirror: right after the import, unchanged,
    and after ``changes`` open issues were closed."""
    ep = endpoint(api_url)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    out: list[Poll] = []
    async with open_endpoint(config, ep, serve=True) as opened:
        assert opened.hosted is not None
        sync = opened.hosted.sync
        for step in ("settle", "unchanged", "changed"):
            if step == "changed":
                fake.advance(60)
                issues = fake.repos[REPO].issues.values()
                opened_issues = [i for i in issues if i.pull is None and i.state == "open"]
                for issue in opened_issues[:changes]:
                    fake.close_issue(REPO, issue.number)
            fake.requests.clear()
            report = await sync.poll_once()
            out.append(Poll(list(fake.requests), report))
    return out


async def raw_listing(fake: FakeGitHub, api_url: str) -> float:
    """The baseline: walk the same list pages with a bare client, parsing the JSON."""
    params = {"state": "all", "sort": "updated", "direction": "asc", "per_page": "100"}
    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=api_url, headers=fake.auth_headers()) as client:
        url: str | None = LIST_PATH
        while url is not None:
            response = await client.get(url, params=params if url == LIST_PATH else None)
            response.json()
            url = response.links.get("next", {}).get("url")
    return time.perf_counter() - start


def row(name: str, value: str, target: str = "") -> str:
    return f"  {name:<48} {value:>12}   {target}".rstrip()


def _count(requests: list[RecordedRequest], keep: Callable[[RecordedRequest], bool]) -> int:
    return sum(1 for r in requests if keep(r))


def _is_list(r: RecordedRequest) -> bool:
    return r.matches("GET", LIST_PATH)


async def main(issues: int = 10_000, rounds: int = 3) -> None:
    fake, linked, timeline_pages = build(issues)
    os.environ[TOKEN_ENV] = fake.token
    listed = issues + len(linked)
    async with serve_fake_github(fake) as api_url:
        with tempfile.TemporaryDirectory() as tmp:
            runs = [await import_once(fake, api_url, Path(tmp) / f"run{k}") for k in range(rounds)]
            polls = await polls_after(fake, api_url, Path(tmp) / "run0", CHANGES)
        baseline = statistics.median([await raw_listing(fake, api_url) for _ in range(rounds)])

    first = runs[0]
    lists = _count(first.requests, _is_list)
    evidence = [r for r in first.requests if not _is_list(r)]
    fetched = {
        int(r.path.rsplit("/", 1)[1])
        for r in evidence
        if r.matches("GET", f"{LIST_PATH}/*") and r.path.rsplit("/", 1)[1].isdigit()
    }
    evidence_target = len(linked) + timeline_pages + len(linked)
    seconds = statistics.median(run.seconds for run in runs)
    print(
        f"\nGitHub sync against the fake GitHub on loopback (SQLite mirror), {issues:,} issues "
        f"and {len(linked)} pull requests each linking one:"
    )
    list_target = f"target {math.ceil(listed / 100)} = ceil({listed:,} listed / 100)"
    print(row("initial import: list requests", f"{lists}", list_target))
    evidence_note = f"target {evidence_target} (issue, timeline, pull request per linked issue)"
    print(row("initial import: evidence requests", f"{len(evidence)}", evidence_note))
    print(row("issues fetched without a link", f"{len(fetched - linked)}", "target 0"))
    print(row("initial import: all requests", f"{len(first.requests)}"))
    settle, unchanged, changed = polls
    read = changed.report.changed
    missed = "" if read == CHANGES else " - MISSED: page 1 answered 304, page 2 was never read"
    for name, poll, note in (
        ("first poll after the import", settle, "the overlap, not yet conditional"),
        ("unchanged poll", unchanged, "target 1 conditional request, 304"),
        (
            f"poll after {CHANGES} issues closed",
            changed,
            f"{read} of {CHANGES} changes read{missed}",
        ),
    ):
        statuses = ", ".join(str(r.status) for r in poll.requests)
        print(row(name, f"{len(poll.requests)} request(s)", f"({statuses}; {note})"))
    per_thousand = f"{seconds / issues * 1000:.2f} s per 1,000 issues"
    print(row(f"import time, median of {rounds}", f"{seconds:.2f} s", per_thousand))
    ratio = f"import cost x{seconds / baseline:.1f} of the baseline"
    print(row("raw listing of the same pages (baseline)", f"{baseline:.2f} s", ratio))
    print(row("import rate", f"{issues / seconds:,.0f} issues/s"))
    assert all(run.report.issues == issues for run in runs)
