"""What the Jira sync costs against the fake Jira served on loopback (SQLite mirror).

Requests are counted from the fake's request log and set beside their targets: an import
of N issues costs ceil(N/100) enhanced-search pages (``/rest/api/3/search/jql``, following
``nextPageToken``), plus one read of the API user's time zone, plus, with remote links
read, one ``remotelink`` read per issue; an unchanged poll costs one search request (the
cursor's minute comes again and is dropped by key and ``updated``). Time is the median of
a few imports, each into a fresh mirror.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.endpoints import hosted_sync
from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.providers.jira.config import JiraConfig
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT
from tests.support.fake_tracker import RecordedRequest, serve_on_loopback

TOKEN_ENV = "COTAL_TASKS_BENCH_JIRA_TOKEN"
SEARCH = "/rest/api/3/search/jql"


def row(name: str, value: str, note: str = "") -> str:
    return f"  {name:<58} {value:<22} {note}"


def build(issues: int) -> FakeJira:
    fake = FakeJira()
    for k in range(issues):
        issue = fake.add_issue(PROJECT, f"Issue {k + 1}", f"Body of issue {k + 1}.")
        if k % 10 == 0:
            issue.remote_links = [{"object": {"url": f"https://github.com/acme/app/pull/{k}"}}]
        fake.advance(10)  # six issues a minute
    return fake


async def import_and_polls(
    fake: FakeJira, site: str, data_dir: Path, *, remote_links: bool
) -> tuple[float, list[RecordedRequest], list[RecordedRequest], list[RecordedRequest]]:
    """One import into a fresh mirror, then two polls with nothing changed: the import's
    seconds and requests, and each poll's requests."""
    settings = JiraConfig(
        api_url=site,
        project=PROJECT,
        email=fake.email,
        token_env=TOKEN_ENV,
        remote_links=remote_links,
        mutation_spacing_s=0,
    )
    endpoint = EndpointConfig(name="com.acme.bench", settings=settings)
    async with hosted_sync(endpoint, data_dir) as sync:
        mark = len(fake.requests)
        start = time.perf_counter()
        report = await sync.poll_once()
        seconds = time.perf_counter() - start
        assert report.issues == len(fake.issues), report
        imported = fake.requests[mark:]
        polls = []
        for _ in range(2):
            mark = len(fake.requests)
            await sync.poll_once()
            polls.append(fake.requests[mark:])
    return seconds, imported, polls[0], polls[1]


def searches(requests: list[RecordedRequest]) -> int:
    return sum(1 for r in requests if r.matches("POST", SEARCH))


async def main(issues: int = 2_000, rounds: int = 3) -> None:
    fake = build(issues)
    os.environ[TOKEN_ENV] = fake.token
    pages = math.ceil(issues / 100)
    async with serve_on_loopback(fake) as site:
        with tempfile.TemporaryDirectory() as tmp:
            runs = [
                await import_and_polls(fake, site, Path(tmp) / f"r{k}", remote_links=False)
                for k in range(rounds)
            ]
            linked = await import_and_polls(fake, site, Path(tmp) / "links", remote_links=True)
    _, imported, first_poll, unchanged = runs[0]
    print(
        f"\nJira sync against the fake Jira on loopback (SQLite mirror), {issues:,} issues "
        f"({sum(1 for i in fake.issues.values() if i.remote_links):,} with a remote link):"
    )
    ratio = searches(imported) / pages
    print(row("import: search pages", f"{searches(imported)}", f"target ceil(N/100) = {pages}"))
    print(row("import: search pages / ceil(N/100)", f"{ratio:.2f}", "target 1.00"))
    print(row("import: all requests (no remote links)", f"{len(imported)}", "the pages alone"))
    link_reads = sum(1 for r in linked[1] if r.path.endswith("/remotelink"))
    print(
        row(
            "import with remote links: all requests",
            f"{len(linked[1])}",
            f"{link_reads} link reads",
        )
    )
    print(
        row(
            "first poll after the import",
            f"{len(first_poll)} request(s)",
            "the user's zone once, then a search",
        )
    )
    print(row("unchanged poll", f"{len(unchanged)} request(s)", "target 1 search"))
    times = statistics.median(run[0] for run in runs)
    print(
        row(f"import time, median of {rounds}", f"{times:.2f} s", f"{issues / times:,.0f} issues/s")
    )
    assert searches(unchanged) == len(unchanged) == 1
    # A burst: 250 issues edited in the cursor's last minute. JQL cannot ask finer than a
    # minute, so each unchanged poll reads that minute again: ceil(250 / 100) pages.
    for issue in list(fake.issues.values())[:250]:
        fake.touch(issue)
    async with serve_on_loopback(fake) as site:
        with tempfile.TemporaryDirectory() as tmp:
            burst = await import_and_polls(fake, site, Path(tmp) / "burst", remote_links=False)
    print(
        row(
            "unchanged poll after a burst of 250 edits in one minute",
            f"{len(burst[3])} request(s)",
            "ceil(250/100) = 3: the minute is read again",
        )
    )
