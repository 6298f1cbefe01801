"""The store harness the behaviour suite runs on: one ``TaskStore`` per kind of store.

``harness`` is parametrized over the in-memory store, the SQLite board, the PostgreSQL
board, and the hosted stores of the four trackers (a ``HostedStore`` over a fresh SQLite
mirror, its tracker the fake GitHub, GitLab, Jira or Linear, built by the bridge's own
``build_endpoint``), and of endpoints over two sources (``github-sources``: two GitHub
repositories, tasks created in the second, so a task's writes are routed by its id to a
source that is not the first; ``linear-teams``: two Linear teams, likewise).
A hosted store assigns the id of a task it creates (the tracker numbers a new issue), so
the harness's ``create(n)`` returns the id the store assigned.

The hosted stores reach their fake in-process: the HTTP client the build made is
kept (base URL, headers, timeout) but sends through ``httpx.ASGITransport`` to the fake's
app instead of a socket. The suite is about the store's behaviour; the trackers' wire is
the provider tests' subject (they use loopback). A socket costs ~40 ms a request with
the bridge's ``serve_http``, which the fakes are served by (``test_the_listener_answers_
without_nagles_delay`` in ``gitlab/test_webhooks.py``), and 25 creates would pay it four
times each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from starlette.types import ASGIApp

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring.endpoints import build_endpoint
from cotal_tasks.core import CreateTaskInput, Task, create_task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.assemble import Hosted
from cotal_tasks.providers.jira.config import JiraConfig
from cotal_tasks.providers.linear.config import LinearConfig
from cotal_tasks.providers.memory import MemoryStore
from cotal_tasks.providers.store import Committed, IdempotencyKey, TaskStore, Write
from tests.bridge._support import DictPresence
from tests.support.fake_github import FakeGitHub
from tests.support.fake_gitlab import FakeGitLab
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT as JIRA_PROJECT
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import TEAM as LINEAR_TEAM

Kind = Literal[
    "memory",
    "sqlite",
    "postgres",
    "github",
    "github-sources",
    "gitlab",
    "jira",
    "linear",
    "linear-teams",
]
# The hosted kinds run their tracker's fake in-process, a second a test: the slow lane.
STORE_KINDS = (
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("github", marks=pytest.mark.slow),
    pytest.param("github-sources", marks=pytest.mark.slow),
    pytest.param("gitlab", marks=pytest.mark.slow),
    pytest.param("jira", marks=pytest.mark.slow),
    pytest.param("linear", marks=pytest.mark.slow),
    pytest.param("linear-teams", marks=pytest.mark.slow),
)
NOW = 1_780_000_000_000
SPACE = "demo"
GITHUB_REPO = "octo-org/hello-world"
GITHUB_SOURCES = ("octo-org/gadgets", GITHUB_REPO)  # github-sources: created in the second
LINEAR_TEAMS = ("OPS", LINEAR_TEAM)  # linear-teams: created in the second
GITLAB_PROJECT = "acme/widgets"
HARNESS_TOKEN_ENV = "COTAL_TASKS_TEST_HARNESS_TOKEN"


def new_task(n: int, *, status: str = "open", **fields: Any) -> Task:
    """The record ``create-task`` would make for task ``n`` (a board keeps its id)."""
    args = CreateTaskInput.model_validate({"title": f"task {n}", "status": status, **fields})
    return create_task(args, task_id=f"t-{n:05d}", space=SPACE, now=NOW + n)


@dataclass
class StoreHarness:
    """One store under test, and how to create in it, reopen it and see its tracker."""

    kind: Kind
    store: TaskStore
    reopen_store: Callable[[], Awaitable[TaskStore]]
    github: FakeGitHub | None = None
    gitlab: FakeGitLab | None = None
    jira: FakeJira | None = None
    linear: FakeLinear | None = None
    hosted_parts: Hosted | None = None
    assigned: dict[int, str] = field(default_factory=dict)

    @property
    def hosted(self) -> bool:
        return self.kind != "memory" and self.kind not in ("sqlite", "postgres")

    async def commit_new(self, task: Task, idempotency: IdempotencyKey | None = None) -> Committed:
        """Commit ``task`` as created (``create-task`` by ``local.op/x``)."""
        write = Write(task, None, "create-task", "local.op/x", idempotency=idempotency)
        return await self.store.commit(write)

    async def create(
        self, n: int, *, status: str = "open", idempotency: IdempotencyKey | None = None
    ) -> str:
        """Create task ``n``; the id the store assigned (``t-0000n`` on a board, the
        tracker's reference on a hosted store)."""
        committed = await self.commit_new(new_task(n, status=status), idempotency)
        self.assigned[n] = committed.task.taskId
        return committed.task.taskId

    def id_of(self, n: int) -> str:
        return self.assigned[n]

    def tracker_writes(self) -> int:
        """Writes the tracker received (0 for a board)."""
        if self.github is not None:
            return len(self.github.writes)
        if self.gitlab is not None:
            return len(self.gitlab.writes)
        if self.jira is not None:
            return len(self.jira.writes)
        if self.linear is not None:
            return len(self.linear.writes)
        return 0

    def tracker_issues(self) -> int:
        if self.github is not None:
            return len(self.github.repos[GITHUB_REPO].issues)
        if self.gitlab is not None:
            return len(self.gitlab.project(GITLAB_PROJECT).issues)
        if self.jira is not None:
            return len(self.jira.issues)
        if self.linear is not None:
            return len(self.linear.issues)
        return 0

    def next_hosted_id(self) -> str:
        """The id the tracker would give the next issue."""
        if self.github is not None:
            return f"{GITHUB_REPO}#{self.github.repos[GITHUB_REPO].next_number}"
        if self.gitlab is not None:
            return f"{GITLAB_PROJECT}#{self.gitlab.project(GITLAB_PROJECT).next_iid}"
        if self.jira is not None:
            return f"{JIRA_PROJECT}#{self.jira.next_number}"
        if self.linear is not None:
            return f"{LINEAR_TEAM}-{self.linear.teams[LINEAR_TEAM].next_number}"
        raise AssertionError("a board has no tracker")

    async def sync(self) -> None:
        """One poll of each source of a hosted store's tracker (nothing for a board)."""
        if self.hosted_parts is not None:
            for source in self.hosted_parts.sources:
                await source.sync.poll_once()

    async def reopen(self) -> TaskStore:
        """Close the store and open it again over the same data."""
        self.store = await self.reopen_store()
        return self.store


def _endpoint(kind: Kind, api_url: str) -> EndpointConfig:
    common: dict[str, Any] = {
        "api_url": api_url,
        "token_env": HARNESS_TOKEN_ENV,
        "mutation_spacing_s": 0.0,
        "poll_interval_s": 60.0,
    }
    if kind == "github":
        return EndpointConfig(
            name="com.acme.github",
            settings=GitHubConfig(repository=GITHUB_REPO, **common),
        )
    if kind == "github-sources":
        return EndpointConfig(
            name="com.acme.github",
            settings=GitHubConfig(repositories=GITHUB_SOURCES, route=GITHUB_REPO, **common),
        )
    if kind == "jira":
        return EndpointConfig(
            name="com.acme.jira",
            settings=JiraConfig(project=JIRA_PROJECT, email="bridge@example.com", **common),
        )
    if kind == "linear":
        return EndpointConfig(
            name="com.acme.linear", settings=LinearConfig(teams=(LINEAR_TEAM,), **common)
        )
    if kind == "linear-teams":
        teams = LinearConfig(teams=LINEAR_TEAMS, create_team=LINEAR_TEAM, **common)
        return EndpointConfig(name="com.acme.linear", settings=teams)
    return EndpointConfig(
        name="com.acme.gitlab",
        settings=GitLabConfig(project=GITLAB_PROJECT, **common),
    )


async def _hosted(
    kind: Kind, mirror_url: str, api_url: str, data_dir: Path, app: ASGIApp
) -> Hosted:
    endpoint = _endpoint(kind, api_url)
    config = BridgeConfig(
        space=SPACE, data_dir=data_dir, http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    mirror = await BoardStore.open(mirror_url, serve=True)
    try:
        built = await build_endpoint(config, endpoint, mirror)
    except BaseException:
        await mirror.close()
        raise
    hosted = built.parts
    assert isinstance(hosted, Hosted)
    made = hosted.http.client
    hosted.http.client = httpx.AsyncClient(
        base_url=made.base_url,
        headers=made.headers,
        timeout=made.timeout,
        transport=httpx.ASGITransport(app=app),
    )
    await made.aclose()
    return hosted


@pytest.fixture(params=STORE_KINDS)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Kind, str]:
    """The kind of store and its database: the board's own, or a hosted store's mirror."""
    kind: Kind = request.param
    if kind == "postgres":
        return kind, request.getfixturevalue("postgres_database")
    if kind == "memory":
        return kind, "memory"
    if kind == "sqlite":
        return kind, f"sqlite:///{tmp_path / 'board.db'}"
    return kind, f"sqlite:///{tmp_path / 'mirror.db'}"


@pytest.fixture
async def harness(
    store_target: tuple[Kind, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StoreHarness]:
    """Every kind of store, fresh and empty, behind one harness."""
    kind, url = store_target
    if kind in ("memory", "sqlite", "postgres"):
        memory = MemoryStore()

        async def open_own() -> TaskStore:
            """The store again over the same data (a closed memory store keeps its own)."""
            return memory.reopen() if kind == "memory" else await BoardStore.open(url)

        opened: list[TaskStore] = [memory if kind == "memory" else await open_own()]

        async def reopen_own() -> TaskStore:
            await opened[-1].close()
            opened.append(await open_own())
            return opened[-1]

        try:
            yield StoreHarness(kind, opened[0], reopen_own)
        finally:
            await opened[-1].close()
        return
    github = (
        FakeGitHub(repos=GITHUB_SOURCES)
        if kind == "github-sources"
        else FakeGitHub()
        if kind == "github"
        else None
    )
    gitlab = FakeGitLab(projects=(GITLAB_PROJECT,)) if kind == "gitlab" else None
    jira = FakeJira() if kind == "jira" else None
    linear = (
        FakeLinear(teams=LINEAR_TEAMS)
        if kind == "linear-teams"
        else FakeLinear()
        if kind == "linear"
        else None
    )
    fake = github or gitlab or jira or linear
    assert fake is not None
    monkeypatch.setenv(HARNESS_TOKEN_ENV, fake.token)
    api_url = {
        "github": "http://fake-github",
        "github-sources": "http://fake-github",
        "gitlab": "http://fake-gitlab/api/v4",
        "jira": "http://fake-jira",
        "linear": "http://fake-linear/graphql",
        "linear-teams": "http://fake-linear/graphql",
    }[kind]
    fake.api_url = api_url  # the links the fake writes name the URL it is reached at
    app = fake.app
    parts: list[Hosted] = [await _hosted(kind, url, api_url, tmp_path, app)]

    async def reopen_hosted() -> TaskStore:
        await parts[-1].close()
        await parts[-1].store.close()
        parts.append(await _hosted(kind, url, api_url, tmp_path, app))
        harness_.hosted_parts = parts[-1]
        return parts[-1].store

    harness_ = StoreHarness(
        kind,
        parts[0].store,
        reopen_hosted,
        github=github,
        gitlab=gitlab,
        jira=jira,
        linear=linear,
        hosted_parts=parts[0],
    )
    try:
        yield harness_
    finally:
        await parts[-1].close()
        await parts[-1].store.close()


@pytest.fixture
def presence() -> DictPresence:
    """The presence port an endpoint's service and sync read; tests put cards in it."""
    return DictPresence()
