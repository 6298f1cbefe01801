"""What the GitLab sync costs, and how much of what GitLab links it finds, against the
fake GitLab served on loopback.

Requests are counted from the fake's request log and set beside their targets: an import
of N issues costs ceil(N/100) issue pages over keyset pagination (GitLab 18.3+), and
1 + ceil((N - 100) / 99) over offset pagination (older servers: each page asks from the
last ``updated_at`` read, which it reads again), plus the merge-request sweep (one page
per 100 merge requests), the notes of every issue (one request each: a commit that
mentions an issue without a merge request shows only as a system note) and evidence
reads for the issues with merge requests (all pages of ``closed_by`` and
``related_merge_requests``, and each merge request in its own project). GitLab offers no
conditional requests, so an unchanged poll costs one (empty but for the overlap) issue
page; the merge-request sweep runs on its own cadence (``merge_requests_interval_s``),
in a poll whose issue listing changed or after a Merge Request or Push Hook. Recall is
the share of the links the fake relates to its issues (merge requests of this project, of
another project and of a fork, one issue with more than a default page of them, commits
that mention an issue without a merge request) that became evidence. Time is the median
of a few keyset imports, each into a fresh SQLite mirror, beside a baseline measured in
the same run: walking the same issue pages with a bare ``httpx`` client, no mapping and
no mirror.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.links import Link, score
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.core import MAX_EVIDENCE
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from cotal_tasks.providers.hosted.sync import SyncReport
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, serve_fake_gitlab
from tests.support.fake_gitlab_model import Issue, MergeRequest

PROJECT = "acme/bench"
OTHER = "acme/upstream"
FORK = "contributor/bench"
ISSUES_PATH = "/api/v4/projects/acme%2Fbench/issues"
MRS_PATH = "/api/v4/projects/acme%2Fbench/merge_requests"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITLAB_TOKEN"
LINK_EVERY = 100  # one merge request closing one issue per this many issues
PLANT_EVERY = 10  # a link named by no merge request text of the project, per this many
BUSY = 25  # merge requests related to one issue: more than GitLab's default page (20)
CHANGES = 10  # issues closed before the incremental poll


@dataclass
class Run:
    seconds: float
    report: SyncReport
    requests: list[RecordedRequest]
    evidence: dict[int, set[Link]] = field(default_factory=dict)


def build(issues: int) -> tuple[FakeGitLab, set[int]]:
    """The fake: ``issues`` issues (a tenth closed), one merge request per ``LINK_EVERY``
    of them closing one, and on every ``PLANT_EVERY``-th issue a link no merge request
    text of the project names: a merge request that mentions it elsewhere (a comment),
    one of another project, a fork's closing one, or a commit pushed without a merge
    request (a system note on the issue); and one issue with ``BUSY`` related
    merge requests. Returns it and the iids the descriptions close."""
    # The throttle counts requests, not time, here (the fake's clock stands still): a
    # budget no import reaches, as the request counts are what is measured.
    fake = FakeGitLab(projects=(PROJECT, OTHER, FORK), rate_limit=1_000_000)
    fake.bulk_issues(PROJECT, issues, closed_every=10)
    linked = set(range(LINK_EVERY // 2, issues + 1, LINK_EVERY))
    for iid in sorted(linked):
        fake.advance(60)  # a merge request a minute, each bumping the issue it names
        fake.add_merge_request(PROJECT, f"Fix #{iid}", source_branch=f"fix-{iid}", closes=[iid])
    for iid in range(PLANT_EVERY // 2, issues + 1, PLANT_EVERY):
        fake.advance(1)
        kind = (iid // PLANT_EVERY) % 4
        if kind == 3:
            fake.mention_in_commit(PROJECT, iid, f"{iid:040x}")
        elif kind == 0:
            fake.add_merge_request(
                PROJECT, f"Work {iid}", "Named in a comment", source_branch=f"w-{iid}",
                mentions=[iid],
            )  # fmt: skip
        elif kind == 1:
            fake.add_merge_request(
                OTHER, f"Upstream {iid}", "x", source_branch=f"up-{iid}", foreign=[(PROJECT, iid)]
            )
        else:
            fake.add_merge_request(
                PROJECT, f"Fork {iid}", source_branch=f"f-{iid}", source_project=FORK,
                closes=[iid],
            )  # fmt: skip
    busy = min(issues, 3)
    for k in range(BUSY):
        fake.advance(1)
        fake.add_merge_request(
            PROJECT, f"Try {k}", f"Tries #{busy}", source_branch=f"try-{k}", mentions=[busy],
            pipeline_status=None,
        )  # fmt: skip
    return fake, linked


COMMIT_NOTE = "mentioned in commit "


def merge_request_links(fake: FakeGitLab, mr: MergeRequest, issue: Issue) -> list[tuple[int, Link]]:
    """What one related merge request says of ``issue``, named as the evidence names it."""
    own = fake.projects[issue.project_id].path_with_namespace
    target = fake.projects[mr.project_id].path_with_namespace
    source = fake.projects[mr.source_project_id or mr.project_id].path_with_namespace
    shapes = fake.shapes()
    at = mr.updated_ms
    found: list[tuple[int, Link]] = [
        (at, ("review", shapes.mr_web(fake.projects[mr.project_id], mr.iid)))
    ]
    found.append(
        (at, ("branch", mr.source_branch if source == own else f"{source}:{mr.source_branch}"))
    )
    if mr.head_pipeline is not None:
        pipeline = shapes.pipeline(fake.projects[mr.project_id], mr.head_pipeline)
        found.append((at, ("run", str(pipeline["web_url"]))))
    if mr.merge_commit_sha and mr.project_id == issue.project_id and issue.iid in mr.closes:
        sha = mr.merge_commit_sha if target == own else f"{target}@{mr.merge_commit_sha}"
        found.append((mr.merged_ms or at, ("commit", sha)))
    return found


def related_links(fake: FakeGitLab, issue: Issue) -> set[Link]:
    """Every link the fake relates to ``issue`` (the newest ``MAX_EVIDENCE`` kept)."""
    newest: dict[Link, int] = {}
    for mr in fake.related_mrs(issue):
        for at, link in merge_request_links(fake, mr, issue):
            newest[link] = max(at, newest.get(link, at))
    for note in issue.notes:  # a commit of this project, pushed without a merge request
        if note.system and note.body.startswith(COMMIT_NOTE):
            link = ("commit", note.body.removeprefix(COMMIT_NOTE))
            newest[link] = max(note.created_ms, newest.get(link, note.created_ms))
    return set(sorted(newest, key=lambda link: newest[link])[-MAX_EVIDENCE:])


def recall(fake: FakeGitLab, run: Run) -> tuple[int, int, int]:
    """(links found, links the fake relates, evidence entries that are none)."""
    issues = fake.project(PROJECT).issues
    return score((related_links(fake, i), run.evidence.get(n, set())) for n, i in issues.items())


def endpoint(api_url: str) -> EndpointConfig:
    gitlab = GitLabConfig(
        project=PROJECT,
        api_url=api_url,
        token_env=TOKEN_ENV,
        mutation_spacing_s=0,
        max_retries=0,
    )
    return EndpointConfig(name="com.example.gitlab", settings=gitlab)


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
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        sync = hosted.sync
        fake.requests.clear()
        start = time.perf_counter()
        report = await sync.poll_once()
        first = Run(time.perf_counter() - start, report, list(fake.requests))
        iids = list(fake.project(PROJECT).issues)
        held = await hosted.store.mirror.get_many([f"{PROJECT}#{n}" for n in iids])
        for iid in iids:
            stored = held.get(f"{PROJECT}#{iid}")
            found = stored.task.evidence if stored is not None else ()
            first.evidence[iid] = {(e.kind, e.ref) for e in found}
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
    merge_requests = len(fake.project(PROJECT).merge_requests)
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

    with_links = sum(1 for i in fake.project(PROJECT).issues.values() if fake.related_mrs(i))
    print(
        f"\nGitLab sync against the fake GitLab on loopback (SQLite mirror), {issues:,} issues, "
        f"{merge_requests:,} merge requests of the project ({len(linked)} closing an issue by "
        f"their description), {with_links:,} issues with related merge requests:"
    )
    mr_target = f"target {max(1, math.ceil(merge_requests / 100))}"
    evidence_target = f"target {issues:,} notes + ~3 per issue with merge requests ({with_links:,})"
    for name, run, pages in (
        ("keyset import", first, math.ceil(issues / 100)),
        ("offset import", offset, 1 + math.ceil(max(0, issues - 100) / 99)),
    ):
        issue_pages, mr_pages, other = counts(run.requests)
        print(row(f"{name}: issue pages", f"{issue_pages}", f"target {pages}"))
        print(row(f"{name}: merge-request pages", f"{mr_pages}", mr_target))
        print(row(f"{name}: evidence requests", f"{other}", evidence_target))
        print(row(f"{name}: all requests", f"{len(run.requests)}"))
    for name, run in (("keyset import", first), ("offset import", offset)):
        found, expected, stray = recall(fake, run)
        share = f"{found / expected:.2%}" if expected else "n/a"
        print(row(f"{name}: evidence recall", share, f"target >= 99% ({found:,} of {expected:,})"))
        print(row(f"{name}: evidence naming no link", f"{stray}", "target 0"))
    settle, unchanged, changed = polls
    for name, poll, note in (
        ("first poll after the import", settle, "the overlap re-read"),
        ("unchanged poll", unchanged, "target 1: one issue page (no 304; MRs on their cadence)"),
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
