"""What a GitLab endpoint over a group costs, beside one over the same projects named one
by one (``projects = [...]``), against the fake GitLab served on loopback.

A group of ``PROJECTS`` projects of ``ISSUES`` issues each, scoped to the label a tenth of
them carry. Requests are counted from the fake's request log, in the same run for both
forms of the endpoint:

- the import: every request of the first poll, divided by what the scoped listings need.
  A group's listing pages by offset (GitLab offers keyset pages for a project's issues
  only), and each next page asks again from the last ``updated_at`` read, so ``L``
  labelled issues take ``1 + ceil((L - 100) / 99)`` pages, plus one merge-request page
  and the group's path (``GET /groups/:id``, once);
  a project's, ``ceil(labelled / 100)`` keyset pages and one merge-request page each.
  Commit mentions are off (``commit_mentions = false``), so no issue's notes are read;
- an unchanged poll: its requests, divided by the sources the form has (the group: one),
  and beside the projects form's, the ratio the group saves (target: one request for the
  whole group, its issue page; GitLab offers no conditional requests, and the
  merge-request sweep runs on its own cadence, ``merge_requests_interval_s``).
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.figures import Table
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from tests.support.fake_gitlab import FakeGitLab, serve_fake_gitlab

PROJECTS = 50
ISSUES = 200  # in each project
KEEP_EVERY = 10  # one issue in this many carries the scope's label
READY = "agent-ready"
TOKEN_ENV = "COTAL_TASKS_BENCH_GITLAB_TOKEN"
LABELLED = PROJECTS * ISSUES // KEEP_EVERY


def names() -> list[str]:
    return [f"acme/project-{k:02d}" for k in range(PROJECTS)]


def build() -> FakeGitLab:
    """The group's issues, last changed a second apart (the newest a minute ago), so an
    unchanged poll's overlap (``overlap_s``) reads a handful of them again, not all."""
    fake = FakeGitLab(projects=names(), rate_limit=1_000_000)
    start = fake.clock.time() - PROJECTS * ISSUES - 60
    for k, project in enumerate(names()):
        for n in range(1, ISSUES + 1):
            labels = [READY] if n % KEEP_EVERY == 0 else []
            at = start + k * ISSUES + n
            fake.add_issue(project, f"Issue {n}", "body", labels=labels, updated_at=at)
    return fake


def endpoint(api_url: str, form: dict[str, Any]) -> EndpointConfig:
    gitlab = GitLabConfig.model_validate(
        {
            **form,
            "api_url": api_url,
            "token_env": TOKEN_ENV,
            "mutation_spacing_s": 0,
            "max_retries": 0,
            "commit_mentions": False,
            "reconcile_interval_s": 0,
            "scope": {"labels": [READY]},
        }
    )
    return EndpointConfig(name="com.example.group", settings=gitlab)


@dataclass
class Run:
    imported: int  # requests of the import
    tasks: int  # tasks it mirrored
    unchanged: int  # requests of an unchanged poll


async def one_run(fake: FakeGitLab, api_url: str, data_dir: Path, form: dict[str, Any]) -> Run:
    ep = endpoint(api_url, form)
    config = BridgeConfig(
        space="bench", data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(ep,)
    )
    async with open_endpoint(config, ep, serve=True) as opened:
        hosted = Hosted.of(opened.parts)
        assert hosted is not None
        fake.requests.clear()
        for source in hosted.sources:
            await source.sync.poll_once()
        imported = len(fake.requests)
        tasks = len([task async for task in hosted.store.mirrored()])
        fake.advance(10)
        fake.requests.clear()
        for source in hosted.sources:
            await source.sync.poll_once()
        return Run(imported, tasks, len(fake.requests))


def needed_by_group() -> int:
    """The group's path (asked once), its offset pages of the labelled issues, and its
    merge-request page."""
    return 1 + 1 + math.ceil((LABELLED - 100) / 99) + 1


def needed_by_projects() -> int:
    """Each project's keyset pages of its labelled issues, and its merge-request page."""
    return PROJECTS * (math.ceil(ISSUES / KEEP_EVERY / 100) + 1)


async def main(rounds: int) -> None:
    fake = build()
    os.environ[TOKEN_ENV] = fake.token
    forms: dict[str, dict[str, Any]] = {
        "group": {"group": "acme"},
        "projects": {"projects": names()},
    }
    runs: dict[str, list[Run]] = {name: [] for name in forms}
    async with serve_fake_gitlab(fake) as url:
        for _ in range(rounds):
            for name, form in forms.items():
                with tempfile.TemporaryDirectory() as tmp:
                    runs[name].append(await one_run(fake, url, Path(tmp), form))
    table = Table(
        f"GitLab group: {PROJECTS} projects x {ISSUES} issues, label scope keeping a tenth "
        f"({LABELLED} tasks), the group beside the same projects named one by one; medians "
        f"of {rounds} rounds"
    )
    took = {run.tasks for group in runs.values() for run in group}
    table.note(
        "tasks mirrored", ", ".join(str(t) for t in sorted(took)), f"{LABELLED}", took == {LABELLED}
    )
    for name, need in (("group", needed_by_group()), ("projects", needed_by_projects())):
        imported = statistics.median(run.imported for run in runs[name])
        ratio = imported / need
        table.note(
            f"import requests / what the scoped listings need ({name})",
            f"{imported:g} / {need} = {ratio:.3f}",
            "<= 1",
            ratio <= 1,
        )
    group = statistics.median(run.unchanged for run in runs["group"])
    projects = statistics.median(run.unchanged for run in runs["projects"])
    table.note("unchanged poll requests, the whole group", f"{group:g}", "<= 1", group <= 1)
    table.note(
        "unchanged poll requests, projects form / group form",
        f"{projects:g} / {group:g} = {projects / group:.1f}",
        "none",
        None,
    )
    table.print()
