"""The hosted trackers side by side, for the suites written once and run against each:
one ``Side`` (``tests.support.tracker_sides``) per tracker says how to make and serve its
fake, open an endpoint or a bridge on it, and read back what an issue holds (its state,
assignees, the marks a claim leaves, user comments or notes, and the writes that reached
it). Where the trackers differ in kind (GitHub and GitLab list issues with a GET of
numbered paths and claim with a label; Jira searches with a POST, names issues by key and
claims by workflow status), a small hook of the side says it; the defaults are GitHub's
and GitLab's.

The fixtures ``tracker_side`` (once per tracker), ``tracker_fake`` (its fake, the token in
the environment) and ``tracker_url`` (the fake served on loopback) are a pytest plugin
the root ``conftest.py`` loads."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import pytest

from cotal_tasks.providers.jira import adf
from tests.providers import hosted_support as hosted
from tests.providers.github import _support as gh
from tests.providers.gitlab import _support as gl
from tests.providers.jira import _support as jr
from tests.providers.linear import _support as ln
from tests.support.fake_github import FakeGitHub
from tests.support.fake_github import iso as github_iso
from tests.support.fake_github_model import Issue, Label
from tests.support.fake_gitlab import FakeGitLab
from tests.support.fake_gitlab import iso as gitlab_iso
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT as JIRA_PROJECT
from tests.support.fake_jira_state import STATUSES as JIRA_STATUSES
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import TEAM as LINEAR_TEAM
from tests.support.fake_linear_state import iso as linear_iso
from tests.support.fake_tracker import RecordedRequest, serve_on_loopback, unmarked
from tests.support.tracker_sides import Side as Side
from tests.support.tracker_sides import Tracker as Tracker


class GitHubSide(Side):
    name, prefix, issues_path = "GitHub", gh.REPO, gh.ISSUES
    listing = ("GET", gh.ISSUES)
    provider, place = "github", "repository"
    seats: ClassVar[dict[str, str]] = {"octobot": "local.worker", "hubot": "local.w"}
    claimed, blocked, open_state = "in-progress", "blocked", "open"
    token_env, revoked_token = gh.TOKEN_ENV, "ghp_rotated000000000000000000000000000000"

    def __init__(self) -> None:
        super().__init__(gh.github_config, gh.github_mesh, gh.open_github)

    def make_fake(self) -> FakeGitHub:
        return FakeGitHub(assignable=list(self.seats))

    def issues(self, fake: FakeGitHub) -> list[Any]:
        return list(fake.repos[gh.REPO].issues.values())

    def number(self, issue: Any) -> int:
        return int(issue.number)

    def notes(self, issue: Any) -> list[str]:
        return [unmarked(c.body) for c in issue.comments]

    def body(self, issue: Any) -> str | None:
        return unmarked(issue.body)  # type: ignore[no-any-return]

    def claim_writes(self, n: int, actor: str) -> list[tuple[str, str]]:
        assigned = [("POST", f"/{n}/assignees")] if self.accounts(actor) else []
        return [*assigned, ("POST", f"/{n}/labels")]

    def add_issue(self, fake: FakeGitHub, title: str, body: str) -> int:
        return int(fake.add_issue(gh.REPO, title, body)["number"])

    def retitle(self, fake: FakeGitHub, issue: Any, title: str) -> None:
        fake.set_title(issue, title, "octocat")

    def updated(self, fake: FakeGitHub, n: int, back_s: int = 0) -> str:
        return github_iso(fake.issue(gh.REPO, n).updated_at - back_s)

    def remove(self, fake: FakeGitHub, n: int) -> None:
        fake.delete_issue(gh.REPO, n)  # gone from every list; GET answers 410

    def drop(self, fake: FakeGitHub, issue: Any) -> str:
        fake.close_issue(gh.REPO, issue.number, "not_planned")
        return "closed/not_planned"

    def closed_as_done(self, fake: FakeGitHub, issue: Any) -> bool:
        return (issue.state, issue.state_reason) == ("closed", "completed")


# The GitHub endpoint over two repositories through a label scope: every shared check runs
# on it too. Created tasks go to the first repository (``route``) with the scope's label,
# and every issue a check makes there carries it (``ScopedFakeGitHub``), as a team labels
# the issues it gives its agents; the second repository's issues are outside the slice.
GADGETS, READY = "octo-org/gadgets", "agent-ready"
SOURCES: dict[str, Any] = {
    "repository": None,
    "repositories": [gh.REPO, GADGETS],
    "route": gh.REPO,
    "scope": {"labels": [READY]},
}


def _sources_config(api_url: str, **overrides: Any) -> Any:
    return gh.github_config(api_url, **{**SOURCES, **overrides})


class ScopedFakeGitHub(FakeGitHub):
    """The fake GitHub where every issue made in the first repository carries ``READY``."""

    def _new_issue(self, repo_name: str, title: str, body: str | None, *rest: Any) -> Issue:
        issue = super()._new_issue(repo_name, title, body, *rest)
        if repo_name == gh.REPO and READY not in issue.labels:
            issue.labels.append(READY)
            self.repos[repo_name].labels.setdefault(READY, Label.make(READY, 7_000_001))
        return issue


class GitHubSourcesSide(GitHubSide):
    """GitHub, the endpoint reading two repositories through a label scope."""

    def __init__(self) -> None:
        Side.__init__(
            self,
            _sources_config,
            hosted.mesh_opener(gh.GitHubMesh, _sources_config),
            hosted.endpoint_opener(
                gh.GitHubEndpoint, hosted.endpoint_maker(gh.ENDPOINT_NAME, _sources_config)
            ),
        )

    def make_fake(self) -> FakeGitHub:
        return ScopedFakeGitHub(repos=(gh.REPO, GADGETS), assignable=list(self.seats))

    def marks(self, issue: Any) -> list[str]:
        return [label for label in issue.labels if label != READY]

    def section(self, api_url: str) -> str:
        return (
            f'provider = "github"\n[endpoints.github]\n'
            f'repositories = ["{gh.REPO}", "{GADGETS}"]\nroute = "{gh.REPO}"\n'
            f'scope = {{ labels = ["{READY}"] }}\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
        )


class GitLabSide(Side):
    name, prefix, issues_path = "GitLab", gl.PROJECT, gl.ISSUES
    listing = ("GET", gl.ISSUES)
    provider, place = "gitlab", "project"
    seats: ClassVar[dict[str, str]] = {
        "worker-bot": "local.worker",
        "w-bot": "local.w",
        "holder-bot": "local.holder",
    }
    claimed, blocked, open_state = gl.CLAIMED, gl.BLOCKED, "opened"
    token_env, revoked_token = gl.TOKEN_ENV, "glpat-rotated00000000000"

    def __init__(self) -> None:
        super().__init__(gl.gitlab_config, gl.gitlab_mesh, gl.open_gitlab)

    def make_fake(self) -> FakeGitLab:
        fake = FakeGitLab(projects=(gl.PROJECT,))
        for username in self.seats:
            fake.add_user(username)
        return fake

    def issues(self, fake: FakeGitLab) -> list[Any]:
        return list(fake.project(gl.PROJECT).issues.values())

    def number(self, issue: Any) -> int:
        return int(issue.iid)

    def notes(self, issue: Any) -> list[str]:
        return [unmarked(n.body) for n in issue.notes if not n.system]

    def body(self, issue: Any) -> str | None:
        return unmarked(issue.description)  # type: ignore[no-any-return]

    def claim_writes(self, n: int, actor: str) -> list[tuple[str, str]]:
        return [("PUT", f"/{n}")]  # GitLab replaces the assignees and adds the label at once

    def add_issue(self, fake: FakeGitLab, title: str, body: str) -> int:
        return int(fake.add_issue(gl.PROJECT, title, body)["iid"])

    def retitle(self, fake: FakeGitLab, issue: Any, title: str) -> None:
        issue.title, issue.updated_ms = title, fake.clock.ms

    def updated(self, fake: FakeGitLab, n: int, back_s: int = 0) -> str:
        return gitlab_iso(fake.issue(gl.PROJECT, n).updated_ms - back_s * 1000)

    def remove(self, fake: FakeGitLab, n: int) -> None:
        fake.delete_issue(gl.PROJECT, n)  # gone from every list; GET answers 404

    def drop(self, fake: FakeGitLab, issue: Any) -> str:
        fake.set_labels(issue, [gl.WONT_DO])
        fake.close_issue(gl.PROJECT, issue.iid)
        return gl.WONT_DO

    def closed_as_done(self, fake: FakeGitLab, issue: Any) -> bool:
        return (issue.state, issue.closed_by) == ("closed", fake.username)


# The GitLab endpoint over two projects through the same label scope, as GitHub's above:
# created tasks go to the first project with the label, which every issue a check makes
# there carries (``ScopedFakeGitLab``); the second project's issues are outside the slice.
GITLAB_SOURCES: dict[str, Any] = {
    "project": None,
    "projects": [gl.PROJECT, "acme/gadgets"],
    "route": gl.PROJECT,
    "scope": {"labels": [READY]},
}


class ScopedFakeGitLab(FakeGitLab):
    """The fake GitLab where every issue made in the first project carries ``READY``."""

    def _new_issue(self, project: Any, *rest: Any) -> Any:
        issue = super()._new_issue(project, *rest)
        if project.path_with_namespace == gl.PROJECT and READY not in issue.labels:
            self.ensure_label(project, READY)
            issue.labels.append(READY)
        return issue


class GitLabSourcesSide(GitLabSide):
    """GitLab, the endpoint reading two projects through a label scope."""

    def __init__(self, settings: dict[str, Any] = GITLAB_SOURCES) -> None:
        def config(api_url: str, **overrides: Any) -> Any:
            return gl.gitlab_config(api_url, **{**settings, **overrides})

        Side.__init__(
            self,
            config,
            hosted.mesh_opener(gl.GitLabMesh, config),
            hosted.endpoint_opener(
                gl.GitLabEndpoint, hosted.endpoint_maker(gl.ENDPOINT_NAME, config)
            ),
        )

    def make_fake(self) -> FakeGitLab:
        fake = ScopedFakeGitLab(projects=GITLAB_SOURCES["projects"])
        for username in self.seats:
            fake.add_user(username)
        return fake

    def marks(self, issue: Any) -> list[str]:
        return [label for label in issue.labels if label != READY]

    def drop(self, fake: FakeGitLab, issue: Any) -> str:
        fake.set_labels(issue, [READY, gl.WONT_DO])  # dropped, and still in the slice
        fake.close_issue(gl.PROJECT, issue.iid)
        return gl.WONT_DO

    def section(self, api_url: str) -> str:
        first, second = GITLAB_SOURCES["projects"]
        return (
            f'provider = "gitlab"\n[endpoints.gitlab]\n'
            f'projects = ["{first}", "{second}"]\nroute = "{first}"\n'
            f'scope = {{ labels = ["{READY}"] }}\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
        )


# The GitLab endpoint over group ``acme`` (its projects, one listing) through the same
# label scope: created tasks go to the first project, whose issues carry the label
# (``ScopedFakeGitLab``); ``acme/gadgets``' issues are outside the slice. Reads and writes
# of one issue go to its project's API by the project's id.
GITLAB_GROUP: dict[str, Any] = {
    "project": None,
    "group": "acme",
    "create_project": gl.PROJECT,
    "scope": {"labels": [READY]},
}


class GitLabGroupSide(GitLabSourcesSide):
    """GitLab, the endpoint reading a group (two projects) through a label scope."""

    # The fake numbers its first project 4101: a group reads one issue by its project's id.
    issues_path = "/api/v4/projects/4101/issues"
    listing = ("GET", "/api/v4/groups/acme/issues")
    offset_pages = True
    create_path = gl.ISSUES  # create_project, by its path

    def __init__(self) -> None:
        super().__init__(GITLAB_GROUP)

    def section(self, api_url: str) -> str:
        return (
            f'provider = "gitlab"\n[endpoints.gitlab]\n'
            f'group = "acme"\ncreate_project = "{gl.PROJECT}"\n'
            f'scope = {{ labels = ["{READY}"] }}\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
        )


class JiraSide(Side):
    """Jira names an issue by key (``DEMO-3``), lists by a JQL search (a POST), and claims
    by assigning and taking the workflow's transition into In Progress: its claim mark is
    that status, not a label."""

    name, prefix, issues_path = "Jira", JIRA_PROJECT, "/rest/api/3/issue"
    listing = ("POST", jr.SEARCH)
    provider, place = "jira", "project"
    seats: ClassVar[dict[str, str]] = {
        "712020:acct-worker": "local.worker",
        "712020:acct-w": "local.w",
        "712020:acct-holder": "local.holder",
    }
    claimed, blocked, open_state, closed_source = "In Progress", "blocked", "open", "Done"
    token_env, revoked_token = jr.TOKEN_ENV, "ATATT3xFfGF0-rotated-api-token"

    def __init__(self) -> None:
        super().__init__(
            lambda api_url: jr.jira_config(api_url, seats=self.seats), jr.jira_mesh, jr.open_jira
        )

    def section(self, api_url: str) -> str:
        seats = "".join(f'"{account}" = "{who}"\n' for account, who in self.seats.items())
        return (
            f'{super().section(api_url)}email = "bridge@example.com"\n'
            f"[endpoints.jira.seats]\n{seats}"
        )

    def make_fake(self) -> FakeJira:
        fake = FakeJira()
        fake.assignable |= set(self.seats)
        return fake

    def issues(self, fake: FakeJira) -> list[Any]:
        return list(fake.issues.values())

    def number(self, issue: Any) -> int:
        return int(issue.number)

    def issue_path(self, n: int) -> str:
        return f"{self.issues_path}/{JIRA_PROJECT}-{n}"

    def probe_path(self) -> str:
        return f"/rest/api/3/project/{JIRA_PROJECT}"

    def notes(self, issue: Any) -> list[str]:
        return [adf.to_text(c.body) or "" for c in issue.comments]

    def body(self, issue: Any) -> str | None:
        return adf.to_text(issue.description)

    def assignees(self, issue: Any) -> list[str]:
        return [] if issue.assignee is None else [issue.assignee]

    def marks(self, issue: Any) -> list[str]:
        category = JIRA_STATUSES[issue.status][0]
        return [*issue.labels, *([issue.status] if category == "indeterminate" else [])]

    def state(self, issue: Any) -> str:
        return "closed" if JIRA_STATUSES[issue.status][0] == "done" else "open"

    def claim_writes(self, n: int, actor: str) -> list[tuple[str, str]]:
        assigned = [("PUT", f"/{JIRA_PROJECT}-{n}/assignee")] if self.accounts(actor) else []
        return [*assigned, ("POST", f"/{JIRA_PROJECT}-{n}/transitions")]

    def add_issue(self, fake: FakeJira, title: str, body: str) -> int:
        return fake.add_issue(JIRA_PROJECT, title, body).number

    def retitle(self, fake: FakeJira, issue: Any, title: str) -> None:
        issue.summary = title
        fake.touch(issue)

    def touch(self, fake: FakeJira, n: int) -> None:
        fake.touch(fake.issue(n))

    def updated(self, fake: FakeJira, n: int, back_s: int = 0) -> str:
        """As the checkpoint's cursor holds it: UTC, milliseconds, ``Z``."""
        at = datetime.fromtimestamp((fake.issue(n).updated_ms - back_s * 1000) / 1000, UTC)
        return at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def since(self, fake: FakeJira, n: int, back_s: int = 0) -> str:
        """JQL compares to the minute, in the API user's zone."""
        ms = fake.issue(n).updated_ms - back_s * 1000
        return datetime.fromtimestamp(ms / 1000, ZoneInfo(fake.time_zone)).strftime(
            "%Y-%m-%d %H:%M"
        )

    def page_args(self, request: RecordedRequest) -> dict[str, str]:
        body = request.body if isinstance(request.body, dict) else {}
        found = re.search(r'updated >= "([^"]+)"', str(body.get("jql", "")))
        args = {"since": found.group(1)} if found else {}
        token = body.get("nextPageToken")
        return {**args, "nextPageToken": token} if isinstance(token, str) else args

    def remove(self, fake: FakeJira, n: int) -> None:
        fake.delete_issue(n)  # gone from every search; GET answers 404

    def drop(self, fake: FakeJira, issue: Any) -> str:
        fake.set_status(issue, "Done", "Won't Do")
        return "Done/Won't Do"

    def closed_as_done(self, fake: FakeJira, issue: Any) -> bool:
        return (issue.status, issue.resolution) == ("Done", "Done")


# The Jira endpoint over two projects through the same label scope, as GitHub's above.
JIRA_SOURCES: dict[str, Any] = {
    "project": None,
    "projects": [JIRA_PROJECT, "OPS"],
    "route": JIRA_PROJECT,
    "scope": {"labels": [READY]},
}


class ScopedFakeJira(FakeJira):
    """The fake Jira with a second project, where every issue made in the first carries
    ``READY``."""

    def __init__(self) -> None:
        super().__init__()
        self.add_project(JIRA_SOURCES["projects"][1])

    def add_issue(self, where: str, title: str, body: str | None = None) -> Any:
        issue = super().add_issue(where, title, body)
        if where == JIRA_PROJECT:
            issue.labels.append(READY)
        return issue


class JiraSourcesSide(JiraSide):
    """Jira, the endpoint reading two projects through a label scope."""

    def __init__(self) -> None:
        def config(api_url: str, **overrides: Any) -> Any:
            return jr.jira_config(api_url, **{"seats": self.seats, **JIRA_SOURCES, **overrides})

        Side.__init__(
            self,
            config,
            hosted.mesh_opener(hosted.HostedMesh, config),
            hosted.endpoint_opener(
                jr.JiraEndpoint, hosted.endpoint_maker(jr.ENDPOINT_NAME, config)
            ),
        )

    def make_fake(self) -> FakeJira:
        fake = ScopedFakeJira()
        fake.assignable |= set(self.seats)
        return fake

    def marks(self, issue: Any) -> list[str]:
        return [label for label in super().marks(issue) if label != READY]

    def listings(self, fake: Any, since: int = 0) -> list[RecordedRequest]:
        """The first project's searches (both projects search at the same path)."""
        own = f'project = "{JIRA_PROJECT}"'
        return [
            r
            for r in super().listings(fake, since)
            if isinstance(r.body, dict) and str(r.body.get("jql", "")).startswith(own)
        ]

    def section(self, api_url: str) -> str:
        first, second = JIRA_SOURCES["projects"]
        seats = "".join(f'"{account}" = "{who}"\n' for account, who in self.seats.items())
        return (
            f'provider = "jira"\n[endpoints.jira]\n'
            f'projects = ["{first}", "{second}"]\nroute = "{first}"\n'
            f'scope = {{ labels = ["{READY}"] }}\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
            f'email = "bridge@example.com"\n[endpoints.jira.seats]\n{seats}'
        )


class LinearSide(Side):
    """Linear names an issue by identifier (``ENG-3``), lists and reads with GraphQL
    queries (the fake logs each as ``/graphql/<operation>``), writes each change as one
    ``issueUpdate`` (logged under the issue, ``/issues/ENG-3/issueUpdate``), and claims by
    delegating to the seat's agent (``worker``, ``holder``) or assigning its user account
    (``w``) and moving the issue to a started state: its claim mark is that state."""

    name, prefix, issues_path = "Linear", LINEAR_TEAM, "/issues"
    listing = ("POST", "/graphql/Issues")
    provider, place = "linear", "teams"
    seats: ClassVar[dict[str, str]] = {
        "00000000-0000-4000-8000-0000000000a1": "local.worker",
        "00000000-0000-4000-8000-0000000000a2": "local.w",
        "00000000-0000-4000-8000-0000000000a3": "local.holder",
    }
    agents = frozenset({"local.worker", "local.holder"})
    claimed, blocked, open_state, closed_source = "In Progress", "Blocked", "open", "Done"
    token_env, revoked_token = ln.TOKEN_ENV, "lin_api_" + "r" * 40

    def __init__(self) -> None:
        super().__init__(
            lambda api_url: ln.linear_config(api_url, seats=self.seats),
            ln.linear_mesh,
            ln.open_linear,
        )

    def section(self, api_url: str) -> str:
        seats = "".join(f'"{account}" = "{who}"\n' for account, who in self.seats.items())
        return (
            f'provider = "linear"\n[endpoints.linear]\nteams = ["{LINEAR_TEAM}"]\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
            f"[endpoints.linear.seats]\n{seats}"
        )

    def make_fake(self) -> FakeLinear:
        fake = FakeLinear()
        for account, who in self.seats.items():
            fake.add_user(who, app=who in self.agents, user_id=account)
        return fake

    def issues(self, fake: FakeLinear) -> list[Any]:
        return list(fake.issues.values())

    def number(self, issue: Any) -> int:
        return int(issue.number)

    def ref(self, n: int) -> str:
        return f"{LINEAR_TEAM}-{n}"

    def number_in(self, task_id: str) -> int:
        return int(task_id.rsplit("-", 1)[1])

    def issue_path(self, n: int) -> str:
        return f"{self.issues_path}/{self.ref(n)}"

    def probe_path(self) -> str:
        return "/graphql/Teams"

    def notes(self, issue: Any) -> list[str]:
        return [unmarked(c.body) for c in issue.comments]

    def body(self, issue: Any) -> str | None:
        return unmarked(issue.description)  # type: ignore[no-any-return]

    def assignees(self, issue: Any) -> list[str]:
        return [a for a in (issue.assignee, issue.delegate) if a]

    def marks(self, issue: Any) -> list[str]:
        started = [issue.state.name] if issue.state.type == "started" else []
        return [*issue.label_names, *started]

    def state(self, issue: Any) -> str:
        return "closed" if issue.state.type in ("completed", "canceled", "duplicate") else "open"

    def claim_writes(self, n: int, actor: str) -> list[tuple[str, str]]:
        return [("POST", f"/{self.ref(n)}/issueUpdate")]  # delegate or assign, and the state

    def add_issue(self, fake: FakeLinear, title: str, body: str) -> int:
        return fake.new_issue(title, body).number

    def retitle(self, fake: FakeLinear, issue: Any, title: str) -> None:
        fake.set_title(issue, title)

    def touch(self, fake: FakeLinear, n: int) -> None:
        fake.edited(fake.issue(self.ref(n)))

    def updated(self, fake: FakeLinear, n: int, back_s: int = 0) -> str:
        return linear_iso(fake.issue(self.ref(n)).updated_ms - back_s * 1000)

    def remove(self, fake: FakeLinear, n: int) -> None:
        fake.delete(fake.issue(self.ref(n)))

    def drop(self, fake: FakeLinear, issue: Any) -> str:
        fake.move(issue, "Canceled")
        return "Canceled"

    def closed_as_done(self, fake: FakeLinear, issue: Any) -> bool:
        return bool(issue.state.name == "Done")

    def page_args(self, request: RecordedRequest) -> dict[str, str]:
        """The walk's start (``updatedAt >= since``) and its Relay cursor (``after``)."""
        variables = request.body.get("variables", {}) if isinstance(request.body, dict) else {}
        since = ((variables.get("filter") or {}).get("updatedAt") or {}).get("gte")
        args = {"since": since} if since else {}
        return {**args, "after": variables["after"]} if variables.get("after") else args


SIDES: dict[str, Side] = {
    "github": GitHubSide(),
    "github-sources": GitHubSourcesSide(),
    "gitlab": GitLabSide(),
    "gitlab-sources": GitLabSourcesSide(),
    "gitlab-group": GitLabGroupSide(),
    "jira": JiraSide(),
    "jira-sources": JiraSourcesSide(),
    "linear": LinearSide(),
}


@pytest.fixture(params=list(SIDES))
def tracker_side(request: pytest.FixtureRequest) -> Side:
    return SIDES[request.param]


@pytest.fixture
def tracker_fake(tracker_side: Side, monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = tracker_side.make_fake()
    monkeypatch.setenv(tracker_side.token_env, fake.token)
    return fake


@pytest.fixture
async def tracker_url(tracker_side: Side, tracker_fake: Any) -> AsyncIterator[str]:
    async with serve_on_loopback(tracker_fake) as url:
        yield url
