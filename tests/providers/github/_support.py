"""Helpers for the GitHub provider tests: a GitHub endpoint opened the way the bridge opens
it (``open_endpoint``) against the fake GitHub on loopback, plus virtual time for the
retry waits and a few readers of the fake's request log.

Fixtures built on these live in ``conftest.py``; the conformance module imports the
helpers directly.
"""

from __future__ import annotations

from typing import Any, cast

from cotal_tasks.providers.hosted.config import GitHubConfig
from tests.conftest import seat
from tests.providers import hosted_support as hosted
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
    """The endpoint's GitHub section (``tracker_section``), the token read from
    ``TOKEN_ENV``. The issue events feed (``reference_events``, on by default) is left
    unread, so a test counts the walk's own requests; ``test_reference_events`` turns it
    on."""
    settings = {
        "repository": REPO,
        "token_env": TOKEN_ENV,
        "seats": SEATS,
        "reference_events": False,
    }
    return cast(GitHubConfig, hosted.tracker_section(GitHubConfig, api_url, settings, overrides))


# ``endpoint_config(api_url, *, database=None, page_ceiling=100, **overrides)``
endpoint_config = hosted.endpoint_maker(ENDPOINT_NAME, "github", github_config)


def task_id(number: int) -> str:
    return f"{REPO}#{number}"


class GitHubEndpoint(hosted.HostedEndpoint[FakeGitHub]):
    """An opened GitHub endpoint (see ``HostedEndpoint``)."""

    prefix = REPO

    async def checkpoint(self) -> Json:
        return await self.sync.checkpoint()


# ``open_github(fake, api_url, data_dir, *, presence=None, database=None, **overrides)``
open_github = hosted.endpoint_opener(GitHubEndpoint, endpoint_config)


def expected_status(fake: FakeGitHub, number: int) -> tuple[str, str]:
    """What the default rules make of a bulk issue (no seat, no workflow label)."""
    issue = fake.issue(REPO, number)
    if issue.state == "closed" and issue.state_reason in ("not_planned", "duplicate"):
        return "dropped", f"closed/{issue.state_reason}"
    if issue.state == "closed":
        return "done", "closed"
    return "open", "open"


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


class GitHubMesh(hosted.HostedMesh[FakeGitHub]):
    """A broker, a bridge serving a GitHub endpoint (``tests.support.bridge.ENDPOINT``)
    against the fake, and a client connection."""


# ``github_mesh(tmp_path, fake, api_url, *, page_ceiling=100, wait_for_sync=True, **overrides)``
github_mesh = hosted.mesh_opener(GitHubMesh, "github", github_config)
