"""An endpoint over several repositories through one scope (``hosted.scope``,
``hosted.sources``): the slice it mirrors, what its listings push to GitHub, an issue
leaving the slice and coming back, a seat working on an issue a person takes out,
created tasks routed with what the scope needs, a repository that answers 404 while the
others sync, and the import horizon."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from cotal_tasks.bridge.config import load_config
from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.linear.config import LinearConfig
from cotal_tasks.providers.registry import provider
from tests.bridge._support import OPERATOR, Client, DictPresence
from tests.providers.github._support import (
    BUILDER,
    REPO,
    SEAT_LOGIN,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    GitHubEndpoint,
    github_mesh,
    open_github,
)
from tests.support.clock import FakeClock
from tests.support.fake_github import (
    FakeGitHub,
    issues_payload,
    serve_fake_github,
    signed_webhook,
)
from tests.support.polling import eventually

GADGETS = "octo-org/gadgets"
READY = "agent-ready"
DAY_S = 86_400


def sources(*repos: str, **scope: Any) -> dict[str, Any]:
    """The overrides of an endpoint over ``repos`` through ``scope``, reading the issue
    events feed (as by default: it names the issues that leave the scope)."""
    return {
        "repository": None,
        "repositories": list(repos),
        "scope": scope,
        "reference_events": True,
    }


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(repos=(REPO, GADGETS), assignable=[SEAT_LOGIN, "octocat"])


@pytest.fixture
async def two(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[GitHubEndpoint]:
    """An endpoint over both repositories, scoped to the ``agent-ready`` label."""
    async with open_github(
        fake,
        github_url,
        tmp_path / "b",
        presence=presence,
        **sources(REPO, GADGETS, labels=[READY]),
    ) as opened:
        yield opened


async def poll_all(end: GitHubEndpoint) -> None:
    for source in end.hosted.sources:
        await source.sync.poll_once()


def listing_params(fake: FakeGitHub, repo: str) -> list[dict[str, str]]:
    return [
        dict(r.query)
        for r in fake.requests
        if r.method == "GET" and r.path == f"/repos/{repo}/issues"
    ]


async def test_two_sources_and_a_label_scope_mirror_exactly_the_slice(
    fake: FakeGitHub, two: GitHubEndpoint
) -> None:
    fake.add_issue(REPO, "in widgets", labels=[READY])
    fake.add_issue(REPO, "not for agents")
    fake.add_issue(GADGETS, "in gadgets", labels=[READY, "bug"])
    fake.add_issue(GADGETS, "a bug only", labels=["bug"])
    await poll_all(two)
    tasks = {task["taskId"]: task["title"] for task in await two.all_tasks()}
    assert tasks == {f"{REPO}#1": "in widgets", f"{GADGETS}#1": "in gadgets"}
    # The label is pushed to GitHub's listing of each repository, not only checked here.
    for repo in (REPO, GADGETS):
        assert all(p.get("labels") == READY for p in listing_params(fake, repo))
    # Each source keeps its own checkpoint, named as a single repository's always was.
    keys = {source.sync.key for source in two.hosted.sources}
    assert keys == {f"github:{REPO}", f"github:{GADGETS}"}


async def test_an_issue_labelled_out_of_the_scope_and_back_keeps_its_task(
    fake: FakeGitHub, two: GitHubEndpoint
) -> None:
    fake.add_issue(GADGETS, "comes and goes", labels=[READY])
    await poll_all(two)
    task_id = f"{GADGETS}#1"
    assert (await two.client.get(task_id))["status"] == "open"

    fake.advance(5)
    fake.remove_label(fake.issue(GADGETS, 1), READY, "octocat")  # a person's change
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["statusSource"] == f"out of scope: label {READY} missing"
    assert [t["taskId"] for t in await two.all_tasks()] == [task_id]  # still readable

    fake.advance(5)
    fake.add_labels(fake.issue(GADGETS, 1), [READY], "octocat")
    await poll_all(two)
    back = await two.client.get(task_id)
    assert (back["status"], back["statusSource"]) == ("open", "open")
    history = await two.store.history(task_id)
    assert [entry.status for entry in history] == ["open", "dropped", "open"]


async def test_a_finished_task_that_leaves_the_scope_stays_done(
    fake: FakeGitHub, two: GitHubEndpoint
) -> None:
    """Done and dropped are the contract's two terminals, finished and abandoned: a closed
    issue labelled out of the slice stays done (before: dropped), says why it is out and
    counts as left (read again when it comes back); back in, it maps from the issue
    again."""
    fake.add_issue(GADGETS, "shipped", labels=[READY])
    fake.close_issue(GADGETS, 1)
    await poll_all(two)
    task_id = f"{GADGETS}#1"
    assert (await two.client.get(task_id))["status"] == "done"

    fake.advance(5)
    fake.remove_label(fake.issue(GADGETS, 1), READY, "octocat")
    await poll_all(two)
    left = await two.client.get(task_id)
    assert (left["status"], left["statusSource"]) == (
        "done",
        f"out of scope: label {READY} missing",
    )
    assert await two.hosted.source(GADGETS).mirroring.left_numbers() == {1}

    fake.advance(5)
    fake.add_labels(fake.issue(GADGETS, 1), [READY], "octocat")
    await poll_all(two)
    back = await two.client.get(task_id)
    assert (back["status"], back["statusSource"]) == ("done", "closed")


async def test_without_the_events_feed_the_reconcile_sweep_finds_a_left_issue(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    fake.add_issue(REPO, "leaves quietly", labels=[READY])
    overrides = {**sources(REPO, GADGETS, labels=[READY]), "reference_events": False}
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **overrides) as end:
        await poll_all(end)
        fake.advance(5)
        fake.remove_label(fake.issue(REPO, 1), READY, "octocat")
        await poll_all(end)
        assert (await end.get(1))["status"] == "open"  # no poll's listing shows it leave
        source = end.hosted.source(REPO)
        await source.sync.reconcile()
        assert (await end.get(1))["statusSource"] == f"out of scope: label {READY} missing"


async def test_a_seat_working_on_an_issue_a_person_takes_out_hears_why(
    fake: FakeGitHub, two: GitHubEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    fake.add_issue(REPO, "claimed, then taken away", labels=[READY])
    await poll_all(two)
    task_id = f"{REPO}#1"
    await two.client.claim(BUILDER, task_id)
    assert fake.issue(REPO, 1).assignees == [SEAT_LOGIN]

    fake.advance(5)
    fake.add_labels(fake.issue(REPO, 1), ["wontfix"], "octocat")
    fake.remove_label(fake.issue(REPO, 1), READY, "octocat")
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["binding"]["actor"] == BUILDER.actor  # the seat stays named

    writes = len([r for r in fake.requests if r.method != "GET" and "graphql" not in r.path])
    error = await two.client.refused_update(
        ErrorCode.FAILED_PRECONDITION, BUILDER, task_id, status="done"
    )
    assert "left this endpoint's scope" in error.message
    assert f"label {READY} missing" in error.message
    assert len([r for r in fake.requests if r.method != "GET" and "graphql" not in r.path]) == (
        writes
    )
    assert fake.issue(REPO, 1).state == "open"  # nothing written to the issue


async def test_a_created_task_lands_in_the_routed_source_with_what_the_scope_needs(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    fake.add_milestone(GADGETS, "v1")
    overrides = sources(REPO, GADGETS, labels=[READY], milestone="v1")
    async with open_github(
        fake, github_url, tmp_path / "b", presence=presence, route=GADGETS, **overrides
    ) as end:
        await poll_all(end)
        created = await end.client.create("made by a seat", brief="details")
        assert created["taskId"] == f"{GADGETS}#1"
        issue = fake.issue(GADGETS, 1)
        assert issue.labels == [READY]
        assert fake.repos[GADGETS].milestones[issue.milestone or 0] == "v1"
        assert not fake.repos[REPO].issues  # nothing in the other repository
        await poll_all(end)
        again = await end.client.get(created["taskId"])
        assert (again["status"], again["statusSource"]) == ("open", "open")  # in its scope


async def test_one_repository_answering_404_leaves_the_others_syncing(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    fake.add_issue(REPO, "still synced", labels=[READY])
    overrides = sources(REPO, "octo-org/vanished", labels=[READY])
    async with open_github(fake, github_url, tmp_path / "b", presence=presence, **overrides) as end:
        report = await end.hosted.catch_up()
        assert any(line.startswith("octo-org/vanished: failed") for line in report.lines)
        assert any(line.startswith(f"{REPO}: synced") for line in report.lines)
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{REPO}#1"]
        # The refused source is shown as such; the endpoint stays ready on the other, its
        # reads marked stale naming the failing repository.
        state = await end.store.sync_state()
        assert state is not None
        assert not state.refused
        by_source = {s.source: s for s in state.sources}
        assert by_source["octo-org/vanished"].refused
        assert by_source[REPO].failing is None
        stale = await end.store.freshness()
        assert stale is not None
        assert stale.reason.startswith("GitHub sync is failing: octo-org/vanished: ")


async def test_the_import_horizon_leaves_old_closed_issues_out(
    tmp_path: Path, presence: DictPresence
) -> None:
    """The sync reads the wall clock, so this fake's clock starts 40 days ago."""
    clock = FakeClock()
    clock.advance(-40 * DAY_S)
    old = FakeGitHub(clock=clock)
    old.add_issue(REPO, "open for ages")
    old.add_issue(REPO, "closed long ago")
    old.close_issue(REPO, 2)
    old.advance(35 * DAY_S)
    old.add_issue(REPO, "closed last week")
    old.close_issue(REPO, 3)
    old.advance(5 * DAY_S - 60)
    async with (
        serve_fake_github(old) as url,
        open_github(old, url, tmp_path / "b", presence=presence, scope={"horizon_days": 30}) as end,
    ):
        await end.poll()
        assert {t["taskId"] for t in await end.all_tasks()} == {f"{REPO}#1", f"{REPO}#3"}
        # Pushed: the open issues, then what changed since the horizon; never state=all
        # from the beginning.
        asked = listing_params(old, REPO)
        assert asked[0]["state"] == "open"
        assert all("since" in p for p in asked if p["state"] == "all")
        # A later poll reads on from the cursor as always.
        old.advance(10)
        old.add_issue(REPO, "new")
        await end.poll()
        assert f"{REPO}#4" in {t["taskId"] for t in await end.all_tasks()}


async def test_a_delivery_wakes_only_the_source_and_issue_it_names(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running bridge over both repositories: an ``issues`` delivery from one of them
    refreshes that issue of that repository, and reads nothing of the other."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    fake.add_issue(REPO, "widgets' one", labels=[READY])
    fake.add_issue(GADGETS, "gadgets' one", labels=[READY])
    overrides = sources(REPO, GADGETS, labels=[READY])
    async with github_mesh(
        tmp_path, fake, github_url, webhook_secret_env=SECRET_ENV, **overrides
    ) as mesh:
        client = Client(mesh.endpoint.service, mesh.endpoint.store)
        await eventually(lambda: _has(client, f"{GADGETS}#1"), 10, what="both repositories synced")
        fake.advance(5)
        fake.remove_label(fake.issue(GADGETS, 1), READY, "octocat")
        mark = len(fake.requests)
        body, headers = signed_webhook(
            WEBHOOK_SECRET, "issues", issues_payload(fake, "unlabeled", GADGETS, 1, label=READY)
        )
        async with httpx.AsyncClient(base_url=str(mesh.bridge.http_url)) as http:
            answer = await http.post("/webhooks/github", content=body, headers=headers)
        assert answer.status_code == 202

        async def left() -> bool:
            return bool((await client.get(f"{GADGETS}#1"))["status"] == "dropped")

        await eventually(left, 5, what="the gadgets task out of the scope")
        paths = {r.path for r in fake.requests[mark:] if "graphql" not in r.path}
        assert paths == {f"/repos/{GADGETS}/issues/1"}  # nothing of the other repository


async def _has(client: Client, task_id: str) -> bool:
    return task_id in {t["taskId"] for t in (await client.call("list-tasks", OPERATOR))["tasks"]}


def test_the_shipped_scoped_example_reads_as_several_sources_and_a_scope() -> None:
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "github-scoped.toml")
    settings = config.endpoints[0].settings
    assert isinstance(settings, GitHubConfig)
    assert settings.sources == ("acme/widgets", "acme/gadgets", "acme/docs")
    assert settings.routed == "acme/widgets"
    assert settings.scope.labels == ("agent-ready",)
    assert settings.listing_filters() == {"labels": "agent-ready"}


def test_a_single_repository_is_a_list_of_one() -> None:
    one = GitHubConfig(repository=REPO)
    assert (one.sources, one.location, one.routed) == ((REPO,), REPO, REPO)
    assert one.scope.lines() == ["scope: every issue"]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({}, "no repository"),
        ({"repository": REPO, "repositories": [GADGETS]}, "both repository and repositories"),
        ({"repositories": [REPO, REPO.upper()]}, "names a repository twice"),
        ({"repositories": [REPO], "route": GADGETS}, "is not one of the sources"),
        ({"repository": REPO, "scope": {"assignee": "stranger"}}, "no account of the seat"),
        ({"repository": REPO, "scope": {"horizon_days": 0}}, "greater than 0"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_remedy(
    settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        GitHubConfig.model_validate(settings)


def test_a_tracker_refuses_a_scope_key_its_issues_do_not_carry() -> None:
    with pytest.raises(ValidationError, match="milestone is not read from this tracker"):
        LinearConfig.model_validate({"teams": ["ENG"], "scope": {"milestone": "v1"}})


async def test_the_preview_shows_each_source_and_why_the_scope_leaves_an_issue_out(
    fake: FakeGitHub, github_url: str
) -> None:
    fake.add_issue(REPO, "for the agents", labels=[READY])
    fake.add_issue(GADGETS, "not labelled")
    settings = GitHubConfig.model_validate(
        {
            **sources(REPO, GADGETS, labels=[READY]),
            "api_url": github_url,
            "token_env": TOKEN_ENV,
        }
    )
    show = provider("github").preview
    assert show is not None
    shown = {task.taskId: task for _, task in await show(settings, "demo", 5)}
    assert set(shown) == {f"{REPO}#1", f"{GADGETS}#1"}
    assert shown[f"{REPO}#1"].status == "open"
    left = shown[f"{GADGETS}#1"]
    assert (left.status, left.statusSource) == ("dropped", f"out of scope: label {READY} missing")
