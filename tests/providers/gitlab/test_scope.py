"""A GitLab endpoint over several projects through one scope (``hosted.scope``,
``hosted.sources``): the slice it mirrors and what its import pushes to GitLab's query, an
issue leaving the slice and coming back, a seat working on an issue a person takes out,
created tasks routed with what the scope needs, a project that answers 404 while the
others sync, the import horizon, and a delivery waking only its project and issue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from cotal_tasks.bridge.config import load_config
from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.registry import provider
from tests.bridge._support import OPERATOR, Client, DictPresence
from tests.providers.gitlab._support import (
    BUILDER,
    HUMAN,
    PROJECT,
    SEAT_USER,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    GitLabEndpoint,
    evidence_requests,
    gitlab_mesh,
    open_gitlab,
)
from tests.support.clock import FakeClock
from tests.support.fake_gitlab import FakeGitLab, serve_fake_gitlab
from tests.support.fake_gitlab_model import Issue
from tests.support.fake_gitlab_webhooks import gitlab_webhook, issue_hook_payload
from tests.support.polling import eventually

GADGETS = "acme/gadgets"
READY = "agent-ready"
DAY_S = 86_400


def sources(*projects: str, **scope: Any) -> dict[str, Any]:
    """The overrides of an endpoint over ``projects`` through ``scope``."""
    return {"project": None, "projects": list(projects), "scope": scope}


@pytest.fixture
async def two(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[GitLabEndpoint]:
    """An endpoint over both projects, scoped to the ``agent-ready`` label."""
    gitlab.add_project(GADGETS)
    async with open_gitlab(
        gitlab,
        gitlab_url,
        tmp_path / "b",
        presence=presence,
        **sources(PROJECT, GADGETS, labels=[READY]),
    ) as opened:
        yield opened


async def poll_all(end: GitLabEndpoint) -> None:
    for source in end.hosted.sources:
        await source.sync.poll_once()


def listing_params(fake: FakeGitLab, project: str) -> list[dict[str, str]]:
    path = f"/api/v4/projects/{project.replace('/', '%2F')}/issues"
    return [dict(r.query) for r in fake.requests if r.matches("GET", path)]


def relabel(fake: FakeGitLab, issue: Issue, *, add: tuple[str, ...] = (), remove: str = "") -> None:
    """A person's label change in GitLab."""
    fake.advance(5)
    fake.set_labels(issue, [*(n for n in issue.labels if n != remove), *add])


async def test_two_projects_and_a_label_scope_mirror_exactly_the_slice(
    gitlab: FakeGitLab, two: GitLabEndpoint
) -> None:
    gitlab.add_issue(PROJECT, "in widgets", labels=[READY])
    gitlab.add_issue(PROJECT, "not for agents")
    gitlab.add_issue(GADGETS, "in gadgets", labels=[READY, "bug"])
    gitlab.add_issue(GADGETS, "a bug only", labels=["bug"])
    await poll_all(two)
    tasks = {task["taskId"]: task["title"] for task in await two.all_tasks()}
    assert tasks == {f"{PROJECT}#1": "in widgets", f"{GADGETS}#1": "in gadgets"}
    # The import pushes the label to GitLab's listing of each project.
    for project in (PROJECT, GADGETS):
        asked = listing_params(gitlab, project)
        assert asked
        assert all(p.get("labels") == READY for p in asked)
    keys = {source.sync.key for source in two.hosted.sources}
    assert keys == {f"gitlab:{PROJECT}", f"gitlab:{GADGETS}"}


async def test_the_whole_scope_is_pushed_to_the_import_and_the_sweep(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    wanted = gitlab.add_milestone(PROJECT, "v1")
    gitlab.add_issue(PROJECT, "the one", labels=[READY], assignees=[SEAT_USER])
    gitlab.set_milestone(gitlab.issue(PROJECT, 1), wanted)
    gitlab.add_issue(PROJECT, "no milestone", labels=[READY], assignees=[SEAT_USER])
    gitlab.add_issue(PROJECT, "won't", labels=[READY, "wontfix"], assignees=[SEAT_USER])
    scope = {
        "labels": [READY],
        "exclude_labels": ["wontfix"],
        "milestone": "v1",
        "issue_type": "issue",
        "assignee": SEAT_USER,
    }
    overrides = {**sources(PROJECT), "scope": scope}
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, **overrides
    ) as end:
        await poll_all(end)
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{PROJECT}#1"]
        first = listing_params(gitlab, PROJECT)[0]
        assert {k: first.get(k) for k in scope_params()} == {
            "labels": READY,
            "not[labels]": "wontfix",
            "milestone": "v1",
            "issue_type": "issue",
            "assignee_username": SEAT_USER,
        }
        await end.hosted.sources[0].sync.reconcile()
        sweep = [p for p in listing_params(gitlab, PROJECT) if p.get("state") == "opened"]
        assert sweep
        assert sweep[-1].get("milestone") == "v1"


def scope_params() -> tuple[str, ...]:
    return ("labels", "not[labels]", "milestone", "issue_type", "assignee_username")


async def test_an_issue_labelled_out_of_the_scope_and_back_keeps_its_task(
    gitlab: FakeGitLab, two: GitLabEndpoint
) -> None:
    gitlab.add_issue(GADGETS, "comes and goes", labels=[READY])
    await poll_all(two)
    task_id = f"{GADGETS}#1"
    assert (await two.client.get(task_id))["status"] == "open"

    relabel(gitlab, gitlab.issue(GADGETS, 1), remove=READY)  # a person's change
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["statusSource"] == f"out of scope: label {READY} missing"
    assert [t["taskId"] for t in await two.all_tasks()] == [task_id]  # still readable

    relabel(gitlab, gitlab.issue(GADGETS, 1), add=(READY,))
    await poll_all(two)
    back = await two.client.get(task_id)
    assert (back["status"], back["statusSource"]) == ("open", "opened")
    history = await two.store.history(task_id)
    assert [entry.status for entry in history] == ["open", "dropped", "open"]


async def test_a_changed_issue_outside_the_scope_costs_no_evidence_read(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """A later poll lists every changed issue, unfiltered (a filtered listing cannot show
    one leaving). Before, each had its notes (and merge requests) read, though nine in
    ten of a narrow slice's are outside it; now only those in the scope do."""
    gitlab.add_issue(PROJECT, "for agents", labels=[READY])
    gitlab.add_issue(PROJECT, "for people")
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, **sources(PROJECT, labels=[READY])
    ) as end:
        await poll_all(end)
        gitlab.advance(60)
        for iid in (1, 2):
            gitlab.add_note(PROJECT, iid, "any news?")
        mark = len(gitlab.requests)
        await poll_all(end)
        read = {r.path.rsplit("/issues/", 1)[-1] for r in evidence_requests(gitlab, mark)}
        assert read == {"1/notes"}
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{PROJECT}#1"]


async def test_a_milestone_changed_by_a_person_takes_the_task_out(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    v1, v2 = gitlab.add_milestone(PROJECT, "v1"), gitlab.add_milestone(PROJECT, "v2")
    gitlab.add_issue(PROJECT, "planned")
    gitlab.set_milestone(gitlab.issue(PROJECT, 1), v1)
    overrides = sources(PROJECT, milestone="v1")
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, **overrides
    ) as end:
        await end.poll()
        gitlab.advance(5)
        gitlab.set_milestone(gitlab.issue(PROJECT, 1), v2)
        await end.poll()
        assert (await end.get(1))["statusSource"] == "out of scope: milestone v2"


async def test_a_seat_working_on_an_issue_a_person_takes_out_hears_why(
    gitlab: FakeGitLab, two: GitLabEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    gitlab.add_issue(PROJECT, "claimed, then taken away", labels=[READY])
    await poll_all(two)
    task_id = f"{PROJECT}#1"
    await two.client.claim(BUILDER, task_id)
    assert gitlab.issue(PROJECT, 1).assignees == [SEAT_USER]

    relabel(gitlab, gitlab.issue(PROJECT, 1), add=("wontfix",), remove=READY)
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["binding"]["actor"] == BUILDER.actor  # the seat stays named

    writes = len([r for r in gitlab.requests if r.method != "GET"])
    error = await two.client.refused_update(
        ErrorCode.FAILED_PRECONDITION, BUILDER, task_id, status="done"
    )
    assert "left this endpoint's scope" in error.message
    assert f"label {READY} missing" in error.message
    assert len([r for r in gitlab.requests if r.method != "GET"]) == writes
    assert gitlab.issue(PROJECT, 1).state == "opened"  # nothing written to the issue


async def test_a_created_task_lands_in_the_routed_project_with_what_the_scope_needs(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    gitlab.add_project(GADGETS)
    milestone = gitlab.add_milestone(GADGETS, "v1")
    overrides = sources(PROJECT, GADGETS, labels=[READY], milestone="v1")
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, route=GADGETS, **overrides
    ) as end:
        await poll_all(end)
        created = await end.client.create("made by a seat", brief="details")
        assert created["taskId"] == f"{GADGETS}#1"
        issue = gitlab.issue(GADGETS, 1)
        assert issue.labels == [READY]
        assert issue.milestone_id == milestone
        assert not gitlab.project(PROJECT).issues  # nothing in the other project
        await poll_all(end)
        again = await end.client.get(created["taskId"])
        assert (again["status"], again["statusSource"]) == ("open", "opened")  # in its scope


async def test_a_create_into_a_project_without_the_scopes_milestone_writes_nothing(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, **sources(PROJECT, milestone="v9")
    ) as end:
        await end.poll()
        error = await end.client.refused(
            ErrorCode.FAILED_PRECONDITION, "create-task", OPERATOR, {"title": "a task"}
        )
        assert "no milestone" in error.message
        assert not gitlab.project(PROJECT).issues
        assert not [r for r in gitlab.requests if r.method == "POST"]


async def test_one_project_answering_404_leaves_the_others_syncing(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    gitlab.add_issue(PROJECT, "still synced", labels=[READY])
    overrides = sources(PROJECT, "acme/vanished", labels=[READY])
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, **overrides
    ) as end:
        report = await end.hosted.catch_up()
        assert any(line.startswith("acme/vanished: failed") for line in report.lines)
        assert any(line.startswith(f"{PROJECT}: synced") for line in report.lines)
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{PROJECT}#1"]
        state = await end.store.sync_state()
        assert state is not None
        assert not state.refused
        by_source = {s.source: s for s in state.sources}
        assert by_source["acme/vanished"].refused
        assert by_source[PROJECT].failing is None
        stale = await end.store.freshness()
        assert stale is not None
        assert stale.reason.startswith("GitLab sync is failing: acme/vanished: ")


async def test_the_import_horizon_leaves_old_closed_issues_out(
    tmp_path: Path, presence: DictPresence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync reads the wall clock, so this fake's clock starts 40 days ago."""
    clock = FakeClock()
    clock.advance(-40 * DAY_S)
    old = FakeGitLab(clock=clock)
    monkeypatch.setenv("COTAL_TASKS_TEST_GITLAB_TOKEN", old.token)
    old.add_issue(PROJECT, "open for ages")
    old.add_issue(PROJECT, "closed long ago")
    old.close_issue(PROJECT, 2)
    old.advance(35 * DAY_S)
    old.add_issue(PROJECT, "closed last week")
    old.close_issue(PROJECT, 3)
    old.advance(5 * DAY_S - 60)
    async with (
        serve_fake_gitlab(old) as url,
        open_gitlab(old, url, tmp_path / "b", presence=presence, scope={"horizon_days": 30}) as end,
    ):
        await end.poll()
        assert {t["taskId"] for t in await end.all_tasks()} == {f"{PROJECT}#1", f"{PROJECT}#3"}
        # Pushed: the open issues, then what changed since the horizon.
        asked = listing_params(old, PROJECT)
        assert asked[0]["state"] == "opened"
        assert all("updated_after" in p for p in asked if p["state"] == "all")
        old.advance(10)
        old.add_issue(PROJECT, "new")
        await end.poll()
        assert f"{PROJECT}#4" in {t["taskId"] for t in await end.all_tasks()}


async def test_a_delivery_wakes_only_the_project_and_issue_it_names(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running bridge over both projects: an Issue Hook from one of them (a project or a
    group hook: the payload names its project either way) refreshes that issue of that
    project, and reads nothing of the other."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    gitlab.add_project(GADGETS)
    gitlab.add_issue(PROJECT, "widgets' one", labels=[READY])
    gitlab.add_issue(GADGETS, "gadgets' one", labels=[READY])
    overrides = sources(PROJECT, GADGETS, labels=[READY])
    async with gitlab_mesh(
        tmp_path, gitlab, gitlab_url, webhook_secret_env=SECRET_ENV, **overrides
    ) as mesh:
        client = Client(mesh.endpoint.service, mesh.endpoint.store)
        await eventually(lambda: _has(client, f"{GADGETS}#1"), 10, what="both projects synced")
        relabel(gitlab, gitlab.issue(GADGETS, 1), remove=READY)
        mark = len(gitlab.requests)
        body, headers = gitlab_webhook(
            WEBHOOK_SECRET, issue_hook_payload(gitlab, GADGETS, 1, "update", user=HUMAN)
        )
        async with httpx.AsyncClient(base_url=str(mesh.bridge.http_url)) as http:
            answer = await http.post("/webhooks/gitlab", content=body, headers=headers)
        assert answer.status_code == 202

        async def left() -> bool:
            return bool((await client.get(f"{GADGETS}#1"))["status"] == "dropped")

        await eventually(left, 5, what="the gadgets task out of the scope")
        paths = {r.path for r in gitlab.requests[mark:]}
        assert paths
        assert all("acme%2Fgadgets/issues/1" in p for p in paths), paths


async def _has(client: Client, task_id: str) -> bool:
    return task_id in {t["taskId"] for t in (await client.call("list-tasks", OPERATOR))["tasks"]}


def test_the_shipped_scoped_example_reads_as_several_projects_and_a_scope() -> None:
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "gitlab-scoped.toml")
    settings = config.endpoints[0].settings
    assert isinstance(settings, GitLabConfig)
    assert settings.sources == ("acme/widgets", "acme/gadgets", "acme/platform/api")
    assert settings.routed == "acme/widgets"
    assert settings.listing_filters() == {"labels": "agent-ready", "not[labels]": "wontfix"}


def test_a_single_project_is_a_list_of_one() -> None:
    one = GitLabConfig(project=PROJECT)
    assert (one.sources, one.location, one.routed) == ((PROJECT,), PROJECT, PROJECT)
    numeric = GitLabConfig(project="4101")
    assert (numeric.sources, numeric.task_link) == (("4101",), None)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({}, "no project"),
        ({"project": PROJECT, "projects": [GADGETS]}, "both project and projects"),
        ({"projects": [PROJECT, PROJECT.upper()]}, "names a project twice"),
        ({"projects": ["4101"]}, "should match pattern"),
        ({"projects": [PROJECT], "route": GADGETS}, "is not one of the sources"),
        ({"project": PROJECT, "scope": {"issue_type": "epic"}}, "not a GitLab issue type"),
        ({"project": PROJECT, "scope": {"assignee": "stranger"}}, "no account of the seat"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_remedy(
    settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        GitLabConfig.model_validate(settings)


async def test_the_preview_shows_each_project_and_why_the_scope_leaves_an_issue_out(
    gitlab: FakeGitLab, gitlab_url: str
) -> None:
    gitlab.add_project(GADGETS)
    gitlab.add_issue(PROJECT, "for the agents", labels=[READY])
    gitlab.add_issue(GADGETS, "not labelled")
    settings = GitLabConfig.model_validate(
        {**sources(PROJECT, GADGETS, labels=[READY]), "api_url": gitlab_url, "token_env": TOKEN_ENV}
    )
    show = provider("gitlab").preview
    assert show is not None
    shown = {task.taskId: task for _, task in await show(settings, "demo", 5)}
    assert set(shown) == {f"{PROJECT}#1", f"{GADGETS}#1"}
    assert shown[f"{PROJECT}#1"].status == "open"
    left = shown[f"{GADGETS}#1"]
    assert (left.status, left.statusSource) == ("dropped", f"out of scope: label {READY} missing")
