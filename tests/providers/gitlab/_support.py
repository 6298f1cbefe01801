"""Helpers for the GitLab provider tests: a GitLab endpoint opened the way the bridge opens
it (``open_endpoint``) against the fake GitLab on loopback, virtual time for the retry
waits, and readers of the fake's request log.

Fixtures built on these live in ``conftest.py``; the conformance module imports the
helpers directly.
"""

from __future__ import annotations

from typing import Any, cast

from cotal_tasks.providers.hosted.config import GitLabConfig
from tests.conftest import seat
from tests.providers import hosted_support as hosted
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, parse_iso

Json = dict[str, Any]

PROJECT = "acme/widgets"
ENCODED = "acme%2Fwidgets"
ISSUES = f"/api/v4/projects/{ENCODED}/issues"
MERGE_REQUESTS = f"/api/v4/projects/{ENCODED}/merge_requests"
ENDPOINT_NAME = "com.acme.gitlab"
TOKEN_ENV = "COTAL_TASKS_TEST_GITLAB_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_GITLAB_WEBHOOK_TOKEN"
WEBHOOK_SECRET = "a gitlab webhook token nobody else knows"

# The seat directory: two GitLab accounts are seats; every other account is a human.
SEAT_USER = "builder-bot"
BUILDER = seat("builder", 1)  # local.builder, the seat builder-bot is
REVIEWER_USER = "reviewer-bot"
REVIEWER = seat("reviewer", 2)  # local.reviewer, the seat reviewer-bot is
HUMAN = "alice"
SEATS = {SEAT_USER: BUILDER.principal, REVIEWER_USER: REVIEWER.principal}

CLAIMED = "workflow::in progress"
BLOCKED = "workflow::blocked"
WONT_DO = "workflow::won't do"


def gitlab_config(api_url: str, **overrides: Any) -> GitLabConfig:
    """The endpoint's GitLab section (``tracker_section``), the token read from
    ``TOKEN_ENV``."""
    settings = {"project": PROJECT, "token_env": TOKEN_ENV, "seats": SEATS}
    return cast(GitLabConfig, hosted.tracker_section(GitLabConfig, api_url, settings, overrides))


# ``endpoint_config(api_url, *, database=None, page_ceiling=100, **overrides)``
endpoint_config = hosted.endpoint_maker(ENDPOINT_NAME, "gitlab", gitlab_config)


def task_id(iid: int) -> str:
    return f"{PROJECT}#{iid}"


class GitLabEndpoint(hosted.HostedEndpoint[FakeGitLab]):
    """An opened GitLab endpoint (see ``HostedEndpoint``)."""

    prefix = PROJECT

    async def cursor(self) -> str | None:
        saved = await self.sync.checkpoint()
        cursor = saved.get("cursor")
        assert cursor is None or isinstance(cursor, str)
        return cursor


# ``open_gitlab(fake, api_url, data_dir, *, presence=None, database=None, **overrides)``
open_gitlab = hosted.endpoint_opener(GitLabEndpoint, endpoint_config)


# -- the request log --------------------------------------------------------------------


def issue_pages(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """``GET /projects/:id/issues`` (the issue listing) from position ``since`` of the log."""
    return [r for r in fake.requests[since:] if r.matches("GET", ISSUES)]


def merge_request_pages(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """``GET /projects/:id/merge_requests`` (the merge-request sweep)."""
    return [r for r in fake.requests[since:] if r.matches("GET", MERGE_REQUESTS)]


def evidence_requests(fake: FakeGitLab, since: int = 0) -> list[RecordedRequest]:
    """Every read that is not a listing: single issues, their links, merge requests."""
    return [
        r
        for r in fake.requests[since:]
        if r.method == "GET"
        and not r.matches("GET", ISSUES)
        and not r.matches("GET", MERGE_REQUESTS)
    ]


def fetched_iids(fake: FakeGitLab, since: int = 0) -> list[int]:
    """The issues read one by one (``GET /issues/:iid``), in order."""
    return [
        int(r.path.rsplit("/", 1)[1])
        for r in fake.requests[since:]
        if r.matches("GET", f"{ISSUES}/*") and r.path.rsplit("/", 1)[1].isdigit()
    ]


def writes_to(fake: FakeGitLab, iid: int, since: int = 0) -> list[RecordedRequest]:
    """The writes to one issue (its PUTs and notes) from position ``since``."""
    return [
        r
        for r in fake.requests[since:]
        if r.is_write and (r.path == f"{ISSUES}/{iid}" or r.path.startswith(f"{ISSUES}/{iid}/"))
    ]


def labels_of(fake: FakeGitLab, iid: int) -> list[str]:
    return list(fake.issue(PROJECT, iid).labels)


def expected_status(fake: FakeGitLab, iid: int) -> tuple[str, str]:
    """What the default rules make of a bulk issue: nobody is a seat, and the only scoped
    workflow label bulk issues carry is ``workflow::in progress`` (claimed, which the
    invariant turns into open without a binding; the label stays the statusSource)."""
    issue = fake.issue(PROJECT, iid)
    if issue.state == "closed":
        return "done", "closed"
    if "workflow::in progress" in issue.labels:
        return "open", "workflow::in progress"
    return "open", "opened"


async def check_mirror_matches(gl: GitLabEndpoint, count: int) -> None:
    tasks = await gl.all_tasks()
    assert sorted(str(t["taskId"]) for t in tasks) == sorted(
        task_id(n) for n in range(1, count + 1)
    )
    wrong = [
        (t["taskId"], t["status"], t["statusSource"])
        for t in tasks
        if (t["status"], t["statusSource"])
        != expected_status(gl.fake, int(str(t["taskId"]).rsplit("#", 1)[1]))
    ]
    assert wrong == []


def newest_updated_at(fake: FakeGitLab) -> int:
    """The highest ``updated_at`` (epoch ms) of the project's issues."""
    return max(issue.updated_ms for issue in fake.project(PROJECT).issues.values())


def ms(stamp: str) -> int:
    return parse_iso(stamp)


# -- over the wire ------------------------------------------------------------------------


class GitLabMesh(hosted.HostedMesh[FakeGitLab]):
    """A broker, a bridge serving a GitLab endpoint (``tests.support.bridge.ENDPOINT``)
    against the fake, and a client connection."""


# ``gitlab_mesh(tmp_path, fake, api_url, *, page_ceiling=100, wait_for_sync=True, **overrides)``
gitlab_mesh = hosted.mesh_opener(GitLabMesh, "gitlab", gitlab_config)
