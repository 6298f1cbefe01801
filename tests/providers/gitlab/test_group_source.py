"""A GitLab endpoint over a group (``gitlab.group``): one listing of the group's issues,
across its projects and subgroups, through the endpoint's scope; task ids those of a
``projects = [...]`` endpoint; a project that joins the group, one that leaves it (or is
archived) and comes back; created tasks in ``create_project``; a group hook routed by its
project; and what an unchanged poll costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.bridge.config import load_config
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.gitlab.webhook import SCHEME
from cotal_tasks.providers.hosted.webhook import receiver
from cotal_tasks.providers.registry import provider
from tests.bridge._support import OPERATOR, DictPresence
from tests.providers.gitlab._support import (
    BUILDER,
    HUMAN,
    PROJECT,
    SEAT_USER,
    TOKEN_ENV,
    open_gitlab,
)
from tests.support.fake_gitlab import FakeGitLab, gitlab_webhook, issue_hook_payload

READY = "agent-ready"
GADGETS, API, ELSEWHERE = "acme/gadgets", "acme/platform/api", "other/elsewhere"
GROUP_ISSUES = "/api/v4/groups/acme/issues"
GROUP_MRS = "/api/v4/groups/acme/merge_requests"
SECRET = "a group webhook token nobody else knows"


def group(**settings: Any) -> dict[str, Any]:
    """The overrides of an endpoint over group ``acme`` scoped to ``READY``."""
    return {"project": None, "group": "acme", "scope": {"labels": [READY]}, **settings}


def task_ids(tasks: list[dict[str, Any]]) -> set[str]:
    return {str(task["taskId"]) for task in tasks}


def seed(fake: FakeGitLab) -> None:
    """Issues in and out of the slice, in the group, a subgroup and another group."""
    for path in (GADGETS, API, ELSEWHERE):
        fake.add_project(path)
    fake.add_issue(PROJECT, "widgets, for agents", labels=[READY])
    fake.add_issue(PROJECT, "widgets, not labelled")
    fake.add_issue(GADGETS, "gadgets, for agents", labels=[READY, "bug"])
    fake.add_issue(API, "the subgroup's, for agents", labels=[READY])
    fake.add_issue(ELSEWHERE, "another group's", labels=[READY])


async def test_a_group_mirrors_exactly_the_slice_with_a_projects_endpoints_ids(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    seed(gitlab)
    slice_ = {f"{PROJECT}#1", f"{GADGETS}#1", f"{API}#1"}
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **group()) as g:
        await g.poll()
        by_group = {t["taskId"]: (t["title"], t["status"]) for t in await g.all_tasks()}
        assert set(by_group) == slice_
        # One listing for the whole group, the scope pushed; no project's own listing.
        asked = [dict(r.query) for r in gitlab.requests if r.matches("GET", GROUP_ISSUES)]
        assert asked
        assert all((q.get("labels"), q.get("scope")) == (READY, "all") for q in asked)
        assert not [
            r for r in gitlab.requests if r.path.endswith("/issues") and "projects" in r.path
        ]
    overrides = {"project": None, "projects": [PROJECT, GADGETS, API], "scope": {"labels": [READY]}}
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "p", presence=presence, **overrides
    ) as projects:
        await projects.poll()
        by_projects = {t["taskId"]: (t["title"], t["status"]) for t in await projects.all_tasks()}
        assert by_projects == by_group
    direct = group(include_subgroups=False)
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "d", presence=presence, **direct) as d:
        await d.poll()
        assert task_ids(await d.all_tasks()) == slice_ - {f"{API}#1"}


async def test_an_unchanged_poll_costs_one_request_and_a_new_project_joins(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    seed(gitlab)
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **group()) as g:
        g.sync_on_tracker_time()
        await g.poll()
        gitlab.advance(10)
        mark = len(gitlab.requests)
        report = await g.poll()
        asked = [(r.method, r.path) for r in gitlab.requests[mark:]]
        # The whole group, unchanged: what one project costs (its issue page; the
        # merge requests wait for their cadence), however many projects it has.
        assert asked == [("GET", GROUP_ISSUES)]
        assert report.changed == 0
        gitlab.advance(300)  # merge_requests_interval_s: the group's merge requests too
        mark = len(gitlab.requests)
        await g.poll()
        asked = [(r.method, r.path) for r in gitlab.requests[mark:]]
        assert asked == [("GET", GROUP_ISSUES), ("GET", GROUP_MRS)]

        gitlab.add_project("acme/newcomer")
        gitlab.advance(5)
        gitlab.add_issue("acme/newcomer", "the newcomer's", labels=[READY])
        await g.poll()
        assert "acme/newcomer#1" in task_ids(await g.all_tasks())


async def test_a_project_that_leaves_the_group_drops_its_tasks_and_they_come_back(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """The issue does not change when its project moves, so its group listing loses it
    without a trace; the reconcile sweep reads it, and reads it again once it is back."""
    presence.put(BUILDER, environment=None)
    gitlab.add_project(GADGETS)
    gitlab.add_issue(GADGETS, "moves away and back", labels=[READY])
    gitlab.add_issue(PROJECT, "archived with its project", labels=[READY])
    task = f"{GADGETS}#1"
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **group()) as g:
        await g.poll()
        await g.client.claim(BUILDER, task)
        assert gitlab.issue(GADGETS, 1).assignees == [SEAT_USER]

        gitlab.transfer_project(GADGETS, "other")
        gitlab.project(PROJECT).archived = True
        await g.sync.reconcile()
        left = await g.client.get(task)
        assert (left["status"], left["statusSource"]) == (
            "dropped",
            "out of scope: project other/gadgets is not in group acme",
        )
        assert left["binding"]["actor"] == BUILDER.actor  # kept
        archived = await g.client.get(f"{PROJECT}#1")
        assert archived["statusSource"] == f"out of scope: project {PROJECT} is archived"
        writes = len(gitlab.writes)
        await g.client.refused_update(ErrorCode.FAILED_PRECONDITION, BUILDER, task, status="done")
        assert len(gitlab.writes) == writes  # nothing written to the issue

        gitlab.transfer_project("other/gadgets", "acme")
        gitlab.project(PROJECT).archived = False
        await g.sync.reconcile()
        back = await g.client.get(task)
        assert (back["status"], back["statusSource"]) == ("claimed", "workflow::in progress")
        assert [e.status for e in await g.store.history(task)] == [
            "open",
            "claimed",
            "dropped",
            "claimed",
        ]
        assert (await g.client.get(f"{PROJECT}#1"))["status"] == "open"


async def test_create_task_lands_in_create_project_and_a_refused_project_contains_its_write(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    gitlab.add_project(GADGETS)
    overrides = group(create_project=GADGETS)
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **overrides) as g:
        await g.poll()
        created = await g.client.create("made by a seat", brief="details")
        assert created["taskId"] == f"{GADGETS}#1"
        assert gitlab.issue(GADGETS, 1).labels == [READY]
        assert not gitlab.project(PROJECT).issues
        await g.poll()
        again = await g.client.get(created["taskId"])
        assert (again["status"], again["statusSource"]) == ("open", "opened")

        # A write one project refuses is that write's answer; the others' go on.
        gitlab.add_issue(PROJECT, "in a project that refuses", labels=[READY])
        gitlab.advance(5)
        await g.poll()
        pid = gitlab.project(PROJECT).id
        gitlab.fail_next(status=403, method="PUT", path=f"/api/v4/projects/{pid}/issues/1")
        with pytest.raises(ContractError) as refused:
            await g.client.claim(BUILDER, f"{PROJECT}#1")
        assert refused.value.outcome == "not-executed"
        claimed = await g.client.claim(BUILDER, created["taskId"])
        assert claimed["status"] == "claimed"
        assert gitlab.issue(GADGETS, 1).assignees == [SEAT_USER]
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "n", presence=presence, **group()) as n:
        error = await n.client.refused(
            ErrorCode.FAILED_PRECONDITION, "create-task", OPERATOR, {"title": "nowhere"}
        )
        assert "create_project" in error.message
        assert len(gitlab.project(GADGETS).issues) == 1  # nothing more written


async def test_a_group_hook_wakes_the_issue_of_the_project_it_names(
    gitlab: FakeGitLab,
    gitlab_url: str,
    tmp_path: Path,
    presence: DictPresence,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GROUP_HOOK_TOKEN", SECRET)
    seed(gitlab)
    overrides = group(webhook_secret_env="GROUP_HOOK_TOKEN")
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **overrides) as g:
        await g.poll()
        gitlab.advance(5)
        gitlab.set_labels(gitlab.issue(GADGETS, 1), [])
        hook = g.hosted.webhook
        assert hook is not None
        route = receiver(SCHEME, [hook])

        async def receive(headers: dict[str, str], body: bytes) -> int:
            reply = await route({k.lower(): v for k, v in headers.items()}, body)
            return reply.status

        body, headers = gitlab_webhook(SECRET, issue_hook_payload(gitlab, GADGETS, 1, user=HUMAN))
        assert (await receive(headers, body)) == 202
        assert (await receive(headers, body)) == 200  # the same delivery again
        mark = len(gitlab.requests)
        await g.sync.refresh_woken()
        assert {r.path for r in gitlab.requests[mark:]} >= {
            f"/api/v4/projects/{gitlab.project(GADGETS).id}/issues/1"
        }
        left = await g.client.get(f"{GADGETS}#1")
        assert left["statusSource"] == f"out of scope: label {READY} missing"
        other, headers = gitlab_webhook(
            SECRET, issue_hook_payload(gitlab, ELSEWHERE, 1, user=HUMAN), event_uuid="e-2"
        )
        assert (await receive(headers, other)) == 404  # not the group's project


async def test_the_preview_of_a_group_shows_why_a_project_or_the_scope_leaves_an_issue_out(
    gitlab: FakeGitLab, gitlab_url: str
) -> None:
    seed(gitlab)
    settings = GitLabConfig.model_validate(
        {
            **group(include_subgroups=False, exclude_projects=["ACME/gadg*"]),
            "api_url": gitlab_url,
            "token_env": TOKEN_ENV,
        }
    )
    show = provider("gitlab").preview
    assert show is not None
    shown = {task.taskId: task.statusSource for _, task in await show(settings, "demo", 10)}
    assert shown[f"{PROJECT}#1"] == "opened"
    assert shown[f"{PROJECT}#2"] == f"out of scope: label {READY} missing"
    assert shown[f"{API}#1"] == f"out of scope: project {API} is in a subgroup of acme"
    assert shown[f"{GADGETS}#1"] == f"out of scope: project {GADGETS} is excluded"
    assert f"{ELSEWHERE}#1" not in shown


async def test_the_online_check_asks_the_token_s_role_in_create_project(
    gitlab: FakeGitLab, gitlab_url: str
) -> None:
    ask = provider("gitlab").access
    assert ask is not None
    base = {"api_url": gitlab_url, "token_env": TOKEN_ENV}
    routed = await ask(GitLabConfig.model_validate({**group(create_project=PROJECT), **base}))
    assert (routed.writes, routed.detail) == (True, f"Developer in {PROJECT}")
    unrouted = await ask(GitLabConfig.model_validate({**group(), **base}))
    assert unrouted.writes is None
    assert "names no create_project" in unrouted.detail


def test_the_shipped_group_example_reads_as_one_group_source() -> None:
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "gitlab-group.toml")
    settings = config.endpoints[0].settings
    assert isinstance(settings, GitLabConfig)
    assert (settings.sources, settings.create_project) == (("acme",), "acme/widgets")
    assert settings.source_lines() == [
        "group acme (subgroups included, except acme/sandbox*); created in acme/widgets"
    ]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"group": "acme", "projects": [PROJECT]}, "both group and project"),
        ({"group": "acme", "route": PROJECT}, "Set create_project"),
        ({"project": PROJECT, "create_project": PROJECT}, "applies to a group endpoint only"),
        ({"group": "acme", "create_project": "other/x"}, "is not in group acme"),
        (
            {"group": "acme", "include_subgroups": False, "create_project": API},
            "is not directly in group acme",
        ),
    ],
)
def test_group_settings_that_cannot_work_are_refused_naming_the_remedy(
    settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        GitLabConfig.model_validate(settings)


async def test_a_group_by_id_knows_its_projects_tasks_after_a_restart_before_any_poll(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """The paths a group's tasks carry are kept in its checkpoint: a seat's write right
    after a restart finds its issue before the first poll has read anything."""
    presence.put(BUILDER, environment=None)
    seed(gitlab)
    by_id = group(group=str(gitlab.groups["acme"]))
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **by_id) as g:
        await g.poll()
        assert f"{API}#1" in task_ids(await g.all_tasks())
        asked = [r for r in gitlab.requests if r.matches("GET", f"/api/v4/groups/{by_id['group']}")]
        assert len(asked) == 1  # its full path, once
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "g", presence=presence, **by_id) as g:
        claimed = await g.client.claim(BUILDER, f"{API}#1")
        assert claimed["status"] == "claimed"
        assert gitlab.issue(API, 1).assignees == [SEAT_USER]
