"""Helpers for the GitHub provider tests: a GitHub endpoint opened the way the bridge opens
it (``open_endpoint``) against the fake GitHub on loopback, plus virtual time for the
retry waits and a few readers of the fake's request log.

Fixtures built on these live in ``conftest.py``; the conformance module imports the
helpers directly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.providers.hosted.config import GitHubConfig
from tests.bridge._support import OPERATOR, DictPresence
from tests.conftest import seat
from tests.providers.hosted_support import (
    HostedEndpoint,
    HostedMesh,
    hosted_wire,
    open_hosted,
)
from tests.support.fake_github import FakeGitHub, RecordedRequest

Json = dict[str, Any]

REPO = "octo-org/hello-world"
ISSUES = f"/repos/{REPO}/issues"
ENDPOINT_NAME = "com.acme.github"
TOKEN_ENV = "COTAL_TASKS_TEST_GITHUB_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_GITHUB_WEBHOOK_SECRET"
WEBHOOK_SECRET = "a webhook secret nobody else knows"

# The seat directory: one GitHub account that is a seat, everything else is a human.
SEAT_LOGIN = "octobot"
BUILDER = seat("builder", 1)  # local.builder, the seat octobot is
HUMAN = "octocat"
SEATS = {SEAT_LOGIN: BUILDER.principal}


def github_config(api_url: str, **overrides: Any) -> GitHubConfig:
    """The endpoint's GitHub section: writes unspaced, a long poll interval (the tests
    poll by hand or wake the loop), the token read from ``TOKEN_ENV``. The issue events
    feed (``reference_events``, on by default) is left unread, so a test counts the walk's
    own requests; ``test_reference_events`` turns it on."""
    settings: Json = {
        "repository": REPO,
        "api_url": api_url,
        "token_env": TOKEN_ENV,
        "mutation_spacing_s": 0.0,
        "poll_interval_s": 60.0,
        "seats": SEATS,
        "reference_events": False,
    }
    return GitHubConfig.model_validate({**settings, **overrides})


def endpoint_config(
    api_url: str, *, database: str | None = None, page_ceiling: int = 100, **overrides: Any
) -> EndpointConfig:
    return EndpointConfig(
        name=ENDPOINT_NAME,
        provider="github",
        database=database,
        page_ceiling=page_ceiling,
        github=github_config(api_url, **overrides),
    )


def task_id(number: int) -> str:
    return f"{REPO}#{number}"


class GitHubEndpoint(HostedEndpoint[FakeGitHub]):
    """An opened GitHub endpoint (see ``HostedEndpoint``)."""

    async def get(self, number: int) -> Json:
        return await self.client.get(task_id(number))

    async def checkpoint(self) -> Json:
        return await self.sync.checkpoint()

    async def all_tasks(self) -> list[Json]:
        pages = await self.client.page_all("list-tasks", OPERATOR, {"limit": 100})
        return [task for page in pages for task in page["tasks"]]


@asynccontextmanager
async def open_github(
    fake: FakeGitHub,
    api_url: str,
    data_dir: Path,
    *,
    presence: DictPresence | None = None,
    database: str | None = None,
    **overrides: Any,
) -> AsyncIterator[GitHubEndpoint]:
    """``open_endpoint`` on a GitHub endpoint against ``api_url`` (the fake on loopback)."""
    endpoint = endpoint_config(api_url, database=database, **overrides)
    async with open_hosted(endpoint, data_dir, presence) as (opened, cards):
        yield GitHubEndpoint(fake, opened, cards)


# -- the request log --------------------------------------------------------------------


def list_requests(fake: FakeGitHub, since: int = 0) -> list[RecordedRequest]:
    """``GET /repos/{o}/{r}/issues`` (the listing) from position ``since`` of the log."""
    return [r for r in fake.requests[since:] if r.matches("GET", ISSUES)]


def evidence_requests(fake: FakeGitHub, since: int = 0) -> list[RecordedRequest]:
    """Every read that is not the listing: single issues, timelines, pull requests."""
    return [r for r in fake.requests[since:] if r.method == "GET" and not r.matches("GET", ISSUES)]


def fetched_issue_numbers(fake: FakeGitHub, since: int = 0) -> list[int]:
    """The issues read one by one (``GET /issues/{n}``), in order."""
    return [
        int(r.path.rsplit("/", 1)[1])
        for r in fake.requests[since:]
        if r.matches("GET", f"{ISSUES}/*") and r.path.rsplit("/", 1)[1].isdigit()
    ]


def label_names(fake: FakeGitHub, number: int) -> list[str]:
    return list(fake.issue(REPO, number).labels)


# -- over the wire -----------------------------------------------------------------------


class GitHubMesh(HostedMesh[FakeGitHub]):
    """A broker, a bridge serving a GitHub endpoint (``tests.support.bridge.ENDPOINT``)
    against the fake, and a client connection."""


@asynccontextmanager
async def github_mesh(
    tmp_path: Path, fake: FakeGitHub, api_url: str, *, page_ceiling: int = 100, **overrides: Any
) -> AsyncIterator[GitHubMesh]:
    async with hosted_wire(
        tmp_path,
        provider="github",
        page_ceiling=page_ceiling,
        github=github_config(api_url, **overrides),
    ) as (url, running, nc, space):
        yield GitHubMesh(url, running, nc, space, fake)
