"""What an endpoint over many repositories through a scope costs, against the fake GitHub
served on loopback.

An endpoint over ``REPOS`` repositories of ``ISSUES`` issues each, scoped to the label a
tenth of them carry. Requests are counted from the fake's request log and set beside what
the scoped listings need, measured in the same run:

- the import: every request of the first poll of every repository, divided by what a
  scoped listing needs (per repository: its issue list pages of the labelled issues,
  ``ceil(labelled / 100)``, plus one GraphQL request per page for their evidence). The
  label is asked of GitHub, so the nine tenths outside the scope cost nothing;
- an unchanged poll: its requests divided by the number of repositories (target: at most
  one, every one conditional and answered 304, which GitHub's rate limit does not count),
  with the default settings (the issue events feed on, read on its own cadence:
  ``github.cadence``) and with ``reference_events = false``;
- the poll that reads the feed because ``reference_events_interval_s`` is over (the
  fake's clock moved on by it; two conditional requests a repository, both 304), and the
  unchanged polls' cost averaged over one interval at ``POLL_S`` a poll.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Table
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from tests.support.fake_github import FakeGitHub, RecordedRequest, serve_fake_github

REPOS = 50
ISSUES = 200  # in each repository
KEEP_EVERY = 10  # one issue in this many carries the scope's label
READY = "agent-ready"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITHUB_TOKEN"
POLL_S: float = GitHubConfig.model_fields["poll_interval_s"].default
INTERVAL_S: float = GitHubConfig.model_fields["reference_events_interval_s"].default


def names() -> list[str]:
    return [f"octo-org/repo-{k:02d}" for k in range(REPOS)]


def build() -> FakeGitHub:
    fake = FakeGitHub(repos=names())
    for repo in names():
        for n in range(1, ISSUES + 1):
            labels = [READY] if n % KEEP_EVERY == 0 else []
            fake.add_issue(repo, f"Issue {n}", "body", labels=labels)
    return fake


def endpoint(api_url: str, reference_events: bool) -> EndpointConfig:
    github = GitHubConfig(
        repositories=tuple(names()),
        api_url=api_url,
        token_env=TOKEN_ENV,
        mutation_spacing_s=0,
        max_retries=0,
        reference_events=reference_events,
        scope={"labels": (READY,)},
    )
    return EndpointConfig(name="com.example.scoped", settings=github)


@dataclass
class Run:
    imported: int  # requests of the import
    tasks: int  # tasks it mirrored
    unchanged: int  # requests of an unchanged poll
    conditional: int  # of those, conditional requests answered 304
    due: int  # requests of an unchanged poll once the feed's interval is over
    due_conditional: int  # of those, answered 304

    def averaged(self) -> float:
        """Requests per unchanged poll and source over one feed interval, a poll every
        ``POLL_S``: the polls between feed reads, then the one that reads it."""
        polls = max(1, math.ceil(INTERVAL_S / POLL_S))
        return (self.unchanged * (polls - 1) + self.due) / polls / REPOS


async def one_run(fake: FakeGitHub, api_url: str, data_dir: Path, reference_events: bool) -> Run:
    ep = endpoint(api_url, reference_events)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    async with open_endpoint(config, ep, serve=True) as opened:
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        hosted.http.clock_s = fake.clock.time  # the feed's cadence on the fake's clock
        imported = len(await poll_all(fake, hosted))
        tasks = len([task async for task in hosted.store.mirrored()])
        fake.advance(round(POLL_S))
        unchanged = await poll_all(fake, hosted)
        fake.advance(round(INTERVAL_S))
        due = await poll_all(fake, hosted)
        return Run(imported, tasks, len(unchanged), answered(unchanged), len(due), answered(due))


async def poll_all(fake: FakeGitHub, hosted: Hosted) -> list[RecordedRequest]:
    """One poll of every source; the requests it sent."""
    start = len(fake.requests)
    for source in hosted.sources:
        await source.sync.poll_once()
    return fake.requests[start:]


def answered(requests: list[RecordedRequest]) -> int:
    """How many of ``requests`` were answered 304."""
    return sum(r.status == 304 for r in requests)


def needed() -> int:
    """What the scoped listings need for the import: per repository, the pages of its
    labelled issues and one GraphQL request per page for their evidence."""
    pages = math.ceil(ISSUES / KEEP_EVERY / 100)
    return REPOS * (pages + pages)


async def main(rounds: int) -> None:
    fake = build()
    os.environ[TOKEN_ENV] = fake.token
    runs: dict[bool, list[Run]] = {False: [], True: []}
    async with serve_fake_github(fake) as url:
        for _ in range(rounds):
            for events in (False, True):
                with tempfile.TemporaryDirectory() as tmp:
                    runs[events].append(await one_run(fake, url, Path(tmp), events))
    quiet, fed = runs[False], runs[True]
    want = REPOS * ISSUES // KEEP_EVERY
    took = {run.tasks for run in quiet + fed}
    table = Table(
        f"Scope: one endpoint over {REPOS} repositories x {ISSUES} issues, label scope keeping "
        f"a tenth ({want} tasks); medians of {rounds} rounds"
    )
    table.note("tasks mirrored", ", ".join(str(t) for t in sorted(took)), f"{want}", took == {want})
    imported = statistics.median(run.imported for run in quiet)
    ratio = imported / needed()
    table.note(
        "import requests / what the scoped listings need",
        f"{imported:g} / {needed()} = {ratio:.3f}",
        "<= 1",
        ratio <= 1,
    )
    for name, group in (
        ("unchanged poll requests / sources (defaults)", fed),
        ("unchanged poll requests / sources (reference_events off)", quiet),
    ):
        asked = statistics.median(run.unchanged for run in group)
        got_304 = statistics.median(run.conditional for run in group)
        per = asked / REPOS
        table.note(
            name,
            f"{asked:g} / {REPOS} = {per:.2f}; {got_304:g} answered 304",
            "<= 1, all 304",
            per <= 1 and got_304 == asked,
        )
    due = statistics.median(run.due for run in fed)
    due_304 = statistics.median(run.due_conditional for run in fed)
    table.note(
        f"  the poll once the feed's {INTERVAL_S:g} s interval is over",
        f"{due:g} / {REPOS} = {due / REPOS:.2f}; {due_304:g} answered 304",
        "2, all 304",
        due == 2 * REPOS and due_304 == due,
    )
    averaged = statistics.median(run.averaged() for run in fed)
    table.note(
        f"  averaged over that interval, a poll every {POLL_S:g} s",
        f"{averaged:.2f} per poll and source",
        f"1 + {POLL_S:g} / {INTERVAL_S:g} = {1 + POLL_S / INTERVAL_S:.2f}",
        None,
    )
    table.print()
