"""A Jira endpoint over several projects through one scope (``hosted.scope``,
``hosted.sources``): the slice it mirrors and the JQL its import asks, an issue leaving
the slice and coming back, a seat working on an issue a person takes out, created tasks
routed to a project with what the scope needs, a project that does not answer while the
others sync, the import horizon, and a delivery waking only its project and issue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.bridge.config import load_config
from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.jira.config import JiraConfig
from cotal_tasks.providers.registry import provider
from tests.bridge._support import Client, DictPresence
from tests.providers.hosted_support import hooked_bridge
from tests.providers.jira._support import (
    BUILDER,
    SEARCH,
    SEAT_ACCOUNT,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    JiraEndpoint,
    endpoint_config,
    open_jira,
)
from tests.support.clock import FakeClock
from tests.support.fake_jira import FakeJira, jira_webhook, webhook_payload
from tests.support.fake_jira_state import PROJECT, Issue
from tests.support.fake_tracker import serve_on_loopback
from tests.support.polling import eventually

OPS = "OPS"
READY = "agent-ready"
DAY_S = 86_400


def sources(*projects: str, **scope: Any) -> dict[str, Any]:
    """The overrides of an endpoint over ``projects`` through ``scope``."""
    return {"project": None, "projects": list(projects), "scope": scope}


@pytest.fixture
async def two(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[JiraEndpoint]:
    """An endpoint over both projects, scoped to the ``agent-ready`` label."""
    jira.add_project(OPS)
    overrides = sources(PROJECT, OPS, labels=[READY])
    async with open_jira(jira, jira_url, tmp_path / "b", presence=presence, **overrides) as opened:
        yield opened


async def poll_all(end: JiraEndpoint) -> None:
    for source in end.hosted.sources:
        await source.sync.poll_once()


def searched(fake: FakeJira) -> list[str]:
    return [str(r.body["jql"]) for r in fake.requests if r.matches("POST", SEARCH)]


def labelled(fake: FakeJira, where: str, title: str, *labels: str) -> Issue:
    issue = fake.add_issue(where, title)
    issue.labels = list(labels)
    return issue


def relabel(fake: FakeJira, issue: Issue, *labels: str) -> None:
    """A person's label change in Jira."""
    fake.advance(60)
    issue.labels = list(labels)
    fake.touch(issue)


async def test_two_projects_and_a_label_scope_mirror_exactly_the_slice(
    jira: FakeJira, two: JiraEndpoint
) -> None:
    labelled(jira, PROJECT, "in demo", READY)
    labelled(jira, PROJECT, "not for agents")
    labelled(jira, OPS, "in ops", READY, "bug")
    labelled(jira, OPS, "a bug only", "bug")
    await poll_all(two)
    tasks = {task["taskId"]: task["title"] for task in await two.all_tasks()}
    assert tasks == {f"{PROJECT}#1": "in demo", f"{OPS}#3": "in ops"}
    # The import asks each project's search for the label.
    imports = searched(jira)
    assert any(q.startswith(f'project = "{OPS}" AND labels = "{READY}"') for q in imports)
    assert any(q.startswith(f'project = "{PROJECT}" AND labels = "{READY}"') for q in imports)
    keys = {source.sync.key for source in two.hosted.sources}
    assert keys == {f"jira:{PROJECT}", f"jira:{OPS}"}


async def test_the_whole_scope_becomes_jql_clauses(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    one = labelled(jira, PROJECT, "the one", READY)
    one.fix_versions, one.issue_type, one.assignee = ["v1"], "Bug", SEAT_ACCOUNT
    other = labelled(jira, PROJECT, "won't", READY, "wontfix")
    other.fix_versions, other.issue_type, other.assignee = ["v1"], "Bug", SEAT_ACCOUNT
    labelled(jira, PROJECT, "no version", READY).assignee = SEAT_ACCOUNT
    scope = {
        "labels": [READY],
        "exclude_labels": ["wontfix"],
        "milestone": "v1",
        "issue_type": "Bug",
        "assignee": SEAT_ACCOUNT,
    }
    overrides = {**sources(PROJECT), "scope": scope}
    async with open_jira(jira, jira_url, tmp_path / "b", presence=presence, **overrides) as end:
        await poll_all(end)
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{PROJECT}#1"]
        assert searched(jira)[0] == (
            f'project = "{PROJECT}" AND labels = "{READY}" AND (labels IS EMPTY OR labels '
            'NOT IN ("wontfix")) AND fixVersion = "v1" AND issuetype = "Bug" AND assignee = '
            f'"{SEAT_ACCOUNT}" ORDER BY updated ASC, key ASC'
        )


async def test_an_issue_labelled_out_of_the_scope_and_back_keeps_its_task(
    jira: FakeJira, two: JiraEndpoint
) -> None:
    issue = labelled(jira, OPS, "comes and goes", READY)
    await poll_all(two)
    task_id = f"{OPS}#1"
    assert (await two.client.get(task_id))["status"] == "open"

    relabel(jira, issue)  # a person removes the label
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["statusSource"] == f"out of scope: label {READY} missing"
    assert [t["taskId"] for t in await two.all_tasks()] == [task_id]  # still readable

    relabel(jira, issue, READY)
    await poll_all(two)
    back = await two.client.get(task_id)
    assert (back["status"], back["statusSource"]) == ("open", "To Do")
    history = await two.store.history(task_id)
    assert [entry.status for entry in history] == ["open", "dropped", "open"]


async def test_a_seat_working_on_an_issue_a_person_takes_out_hears_why(
    jira: FakeJira, two: JiraEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    jira.assignable.add(SEAT_ACCOUNT)
    issue = labelled(jira, PROJECT, "claimed, then taken away", READY)
    await poll_all(two)
    task_id = f"{PROJECT}#1"
    await two.client.claim(BUILDER, task_id)
    assert issue.assignee == SEAT_ACCOUNT

    relabel(jira, issue, "wontfix")
    await poll_all(two)
    left = await two.client.get(task_id)
    assert left["status"] == "dropped"
    assert left["binding"]["actor"] == BUILDER.actor  # the seat stays named

    writes = len([r for r in jira.requests if r.method != "GET" and r.path != SEARCH])
    error = await two.client.refused_update(
        ErrorCode.FAILED_PRECONDITION, BUILDER, task_id, status="done"
    )
    assert "left this endpoint's scope" in error.message
    assert f"label {READY} missing" in error.message
    assert len([r for r in jira.requests if r.method != "GET" and r.path != SEARCH]) == writes
    assert issue.status == "In Progress"  # nothing written to the issue


async def test_a_created_task_lands_in_the_routed_project_with_what_the_scope_needs(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    jira.add_project(OPS)
    overrides = sources(PROJECT, OPS, labels=[READY], milestone="v1", issue_type="Bug")
    async with open_jira(
        jira, jira_url, tmp_path / "b", presence=presence, route=OPS, **overrides
    ) as end:
        await poll_all(end)
        created = await end.client.create("made by a seat", brief="details")
        assert created["taskId"] == f"{OPS}#1"
        issue = jira.by_key(f"{OPS}-1")
        assert issue is not None
        assert (issue.labels, issue.fix_versions, issue.issue_type) == ([READY], ["v1"], "Bug")
        await poll_all(end)
        again = await end.client.get(created["taskId"])
        assert (again["status"], again["statusSource"]) == ("open", "To Do")  # in its scope


async def test_one_project_that_does_not_answer_leaves_the_others_syncing(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    labelled(jira, PROJECT, "still synced", READY)
    overrides = sources(PROJECT, "GONE", labels=[READY])
    async with open_jira(jira, jira_url, tmp_path / "b", presence=presence, **overrides) as end:
        report = await end.hosted.catch_up()
        assert any(line.startswith("GONE: failed") for line in report.lines)
        assert any(line.startswith(f"{PROJECT}: synced") for line in report.lines)
        assert [t["taskId"] for t in await end.all_tasks()] == [f"{PROJECT}#1"]
        state = await end.store.sync_state()
        assert state is not None
        assert not state.refused
        by_source = {s.source: s for s in state.sources}
        assert by_source["GONE"].failing is not None
        assert by_source[PROJECT].failing is None


async def test_the_import_horizon_leaves_old_closed_issues_out(
    tmp_path: Path, presence: DictPresence
) -> None:
    """The sync reads the wall clock, so this fake's clock starts 40 days ago."""
    clock = FakeClock()
    clock.advance(-40 * DAY_S)
    old = FakeJira(clock=clock)
    old.add_issue(PROJECT, "open for ages")
    old.set_status(old.add_issue(PROJECT, "closed long ago"), "Done", "Done")
    old.advance(35 * DAY_S)
    old.set_status(old.add_issue(PROJECT, "closed last week"), "Done", "Done")
    old.advance(5 * DAY_S - 60)
    async with (
        serve_on_loopback(old) as url,
        open_jira(old, url, tmp_path / "b", presence=presence, scope={"horizon_days": 30}) as end,
    ):
        await end.poll()
        assert {t["taskId"] for t in await end.all_tasks()} == {f"{PROJECT}#1", f"{PROJECT}#3"}
        assert "(statusCategory != Done OR updated >= " in searched(old)[0]
        old.advance(60)
        old.add_issue(PROJECT, "new")
        await end.poll()
        assert f"{PROJECT}#4" in {t["taskId"] for t in await end.all_tasks()}


async def test_a_delivery_wakes_only_the_project_and_issue_it_names(
    jira: FakeJira, jira_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    jira.add_project(OPS)
    labelled(jira, PROJECT, "demo's one", READY)
    ops = labelled(jira, OPS, "ops' one", READY)
    endpoint = endpoint_config(
        jira_url, webhook_secret_env=SECRET_ENV, **sources(PROJECT, OPS, labels=[READY])
    )
    async with hooked_bridge(endpoint, tmp_path / "bridge") as (bridge, http):
        client = Client(bridge.endpoints[0].service, bridge.endpoints[0].store)

        async def synced() -> bool:
            return len((await client.call("list-tasks", BUILDER))["tasks"]) == 2

        await eventually(synced, 10, what="both projects synced")
        relabel(jira, ops)
        mark = len(jira.requests)
        headers, body = jira_webhook(
            webhook_payload(jira, "jira:issue_updated", ops), WEBHOOK_SECRET
        )
        answer = await http.post("/webhooks/jira", content=body, headers=headers)
        assert answer.status_code == 202

        async def left() -> bool:
            return bool((await client.get(f"{OPS}#2"))["status"] == "dropped")

        await eventually(left, 5, what="the ops task out of the scope")
        paths = {r.path for r in jira.requests[mark:]}
        assert paths
        assert all(f"{OPS}-2" in p for p in paths), paths


def test_the_shipped_scoped_example_reads_as_several_projects_and_a_scope() -> None:
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "jira-scoped.toml")
    settings = config.endpoints[0].settings
    assert isinstance(settings, JiraConfig)
    assert settings.sources == ("ENG", "OPS")
    assert settings.routed == "ENG"
    assert settings.scope_clauses() == [
        'labels = "agent-ready"',
        '(labels IS EMPTY OR labels NOT IN ("wontfix"))',
    ]


def test_a_single_project_is_a_list_of_one() -> None:
    one = JiraConfig(project=PROJECT, api_url="https://acme.atlassian.net", email="a@b.c")
    assert (one.sources, one.location, one.routed) == ((PROJECT,), PROJECT, PROJECT)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({}, "no project"),
        ({"project": PROJECT, "projects": [OPS]}, "both project and projects"),
        ({"projects": [OPS, OPS]}, "names a project twice"),
        ({"projects": ["ops"]}, "is not a Jira project key"),
        ({"projects": [OPS], "route": PROJECT}, "is not one of the sources"),
        ({"project": PROJECT, "scope": {"assignee": "stranger"}}, "no account of the seat"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_remedy(
    settings: dict[str, Any], says: str
) -> None:
    base = {"api_url": "https://acme.atlassian.net", "email": "a@b.c"}
    with pytest.raises(ValidationError, match=says):
        JiraConfig.model_validate({**base, **settings})


def test_a_label_with_a_quote_stays_one_jql_string() -> None:
    config = JiraConfig(
        project=PROJECT,
        api_url="https://acme.atlassian.net",
        email="a@b.c",
        scope={"labels": ['say "hi"']},
    )
    assert config.scope_clauses() == ['labels = "say \\"hi\\""']


async def test_the_preview_shows_each_project_and_why_the_scope_leaves_an_issue_out(
    jira: FakeJira, jira_url: str
) -> None:
    jira.add_project(OPS)
    labelled(jira, PROJECT, "for the agents", READY)
    labelled(jira, OPS, "not labelled")
    settings = JiraConfig.model_validate(
        {
            **sources(PROJECT, OPS, labels=[READY]),
            "api_url": jira_url,
            "token_env": TOKEN_ENV,
            "email": "bridge@example.com",
        }
    )
    show = provider("jira").preview
    assert show is not None
    shown = {task.taskId: task for _, task in await show(settings, "demo", 5)}
    assert set(shown) == {f"{PROJECT}#1", f"{OPS}#2"}
    assert shown[f"{PROJECT}#1"].status == "open"
    left = shown[f"{OPS}#2"]
    assert (left.status, left.statusSource) == ("dropped", f"out of scope: label {READY} missing")
