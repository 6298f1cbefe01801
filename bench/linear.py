"""What the Linear sync costs against the fake Linear served on loopback (SQLite mirror).

The fake validates and executes every query on Linear's published schema and prices it as
Linear documents its complexity (a point an object, a tenth a field, a connection's nodes
times ``first``), answering the price in ``X-Complexity``. An import of N issues is set
beside what its pages need: ceil(N / page_size) requests, each at the price of one full
page; an unchanged poll beside one full page. Time is the median of a few imports, each
into a fresh mirror, on a machine other work shares (the figures that matter are the
counts, which do not move with load).
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from graphql import parse

from bench.endpoints import hosted_sync
from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.providers.linear import queries
from cotal_tasks.providers.linear.config import LinearConfig
from tests.support.fake_linear import FakeLinear, complexity
from tests.support.fake_linear_state import TEAM
from tests.support.fake_tracker import serve_on_loopback

TOKEN_ENV = "COTAL_TASKS_BENCH_LINEAR_TOKEN"
PAGE = 50


def row(name: str, value: str, note: str = "") -> str:
    return f"  {name:<58} {value:<22} {note}"


def build(issues: int) -> FakeLinear:
    fake = FakeLinear()
    fake.set_rate_limit(1_000_000, complexity=10**12, reset_in=10**6)
    for k in range(issues):
        issue = fake.new_issue(f"Issue {k + 1}", f"Body of issue {k + 1}.")
        if k % 10 == 0:
            fake.attach(issue, f"https://github.com/acme/app/pull/{k}")
        fake.advance(10)
    return fake


def page_price(first: int) -> int:
    """What one page of the walk costs, priced as the fake prices it."""
    variables = {"first": first, "evidence": True, "withTeam": False}
    return complexity(parse(queries.ISSUES), variables)


async def import_and_polls(
    fake: FakeLinear, api_url: str, data_dir: Path
) -> tuple[float, list[int], list[int], list[int]]:
    """One import into a fresh mirror, then two polls with nothing changed: the import's
    seconds, and the points each request of the import and of each poll cost."""
    settings = LinearConfig(
        api_url=api_url, teams=(TEAM,), token_env=TOKEN_ENV, page_size=PAGE, mutation_spacing_s=0
    )
    endpoint = EndpointConfig(name="com.acme.bench", settings=settings)
    async with hosted_sync(endpoint, data_dir) as sync:
        mark = len(fake.complexities)
        start = time.perf_counter()
        report = await sync.poll_once()
        seconds = time.perf_counter() - start
        assert report.issues == len(fake.issues), report
        imported = fake.complexities[mark:]
        polls = []
        for _ in range(2):
            fake.advance(60)
            mark = len(fake.complexities)
            await sync.poll_once()
            polls.append(fake.complexities[mark:])
    return seconds, imported, polls[0], polls[1]


async def main(issues: int = 2_000, rounds: int = 3) -> None:
    fake = build(issues)
    os.environ[TOKEN_ENV] = fake.token
    pages = math.ceil(issues / PAGE)
    full = page_price(PAGE)
    async with serve_on_loopback(fake) as api_url:
        with tempfile.TemporaryDirectory() as tmp:
            runs = [
                await import_and_polls(fake, api_url, Path(tmp) / f"r{k}") for k in range(rounds)
            ]
    _, imported, first_poll, unchanged = runs[0]
    print(
        f"\nLinear sync against the fake Linear on loopback (SQLite mirror), {issues:,} issues "
        f"({issues // 10 + (issues % 10 > 0):,} with a GitHub attachment), pages of {PAGE}:"
    )
    print(
        row(
            "import: requests", f"{len(imported)}", f"what the pages need: ceil(N/{PAGE}) = {pages}"
        )
    )
    print(
        row("import: requests / ceil(N/page_size)", f"{len(imported) / pages:.2f}", "target 1.00")
    )
    points = sum(imported)
    print(
        row(
            "import: complexity points",
            f"{points:,}",
            f"the pages at {full:,} points each: {pages * full:,}",
        )
    )
    print(
        row(
            "import: points / (pages x one full page)",
            f"{points / (pages * full):.3f}",
            "target <= 1.00 (+ the team, asked on a walk's first page)",
        )
    )
    print(
        row("import: points per issue", f"{points / issues:.1f}", "labels and attachments: 20 each")
    )
    print(
        row(
            "first poll after the import",
            f"{len(first_poll)} request(s)",
            f"{sum(first_poll):,} points",
        )
    )
    print(
        row(
            "unchanged poll",
            f"{len(unchanged)} request(s), {sum(unchanged):,} pt",
            f"target 1 request; {sum(unchanged) / full:.2f} of a full page",
        )
    )
    seconds = statistics.median(run[0] for run in runs)
    spread = max(run[0] for run in runs) - min(run[0] for run in runs)
    print(
        row(
            f"import time, median of {rounds}",
            f"{seconds:.2f} s (spread {spread:.2f})",
            f"{issues / seconds:,.0f} issues/s",
        )
    )
    assert len(unchanged) == 1
    assert len(imported) == pages
