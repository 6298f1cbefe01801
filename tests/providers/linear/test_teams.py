"""A Linear endpoint over several teams, each a source with its own sync, checkpoint and
health, through one scope: the slice mirrored exactly, one team failing while the other
syncs, an issue leaving the scope and coming back as the same task, a seat's write on an
issue a person took out, a created issue routed to its team with what the scope needs,
and an agent's note as activity of its session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.linear.config import LinearConfig
from tests.bridge._support import DictPresence
from tests.providers.linear._support import BUILDER, LinearEndpoint, open_linear
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import Issue, User

READY = "agent-ready"


def writes(fake: FakeLinear, since: int) -> list[str]:
    return [r.path for r in fake.requests[since:] if r.path.startswith("/issues")]


@pytest.fixture
async def two(
    linear: FakeLinear, linear_url: str, agent: User, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[LinearEndpoint]:
    """ENG and OPS through the scope "labelled agent-ready"; the agent is a seat."""
    linear.add_team("OPS")
    linear.add_team("XYZ")  # a team of the workspace the endpoint does not sync
    linear.add_label(READY)
    settings: dict[str, Any] = {"teams": ["ENG", "OPS"], "scope": {"labels": [READY]}}
    async with with_seat(linear, linear_url, tmp_path, presence, agent, **settings) as opened:
        yield opened


def with_seat(
    fake: FakeLinear,
    url: str,
    tmp_path: Path,
    presence: DictPresence,
    agent: User,
    **settings: Any,
) -> AbstractAsyncContextManager[LinearEndpoint]:
    """An endpoint whose seat directory maps the agent to the present seat BUILDER."""
    presence.put(BUILDER, environment=None)
    seats = {agent.id: BUILDER.principal}
    return open_linear(fake, url, tmp_path / "b", presence=presence, seats=seats, **settings)


def labelled(fake: FakeLinear, team: str, title: str) -> Issue:
    issue = fake.new_issue(title, team=team)
    fake.label(issue, READY)
    return issue


async def test_two_teams_and_a_label_scope_mirror_exactly_the_slice(
    linear: FakeLinear, two: LinearEndpoint
) -> None:
    labelled(linear, "ENG", "eng, ready")
    linear.new_issue("eng, not for the agents", team="ENG")
    labelled(linear, "OPS", "ops, ready")
    labelled(linear, "XYZ", "another team's")
    await two.poll()
    tasks = {t["taskId"]: t["title"] for t in await two.all_tasks()}
    assert tasks == {"ENG-1": "eng, ready", "OPS-1": "ops, ready"}
    # Each team has its own sync, checkpoint and state, and its import asked its team.
    assert [s.path for s in two.hosted.sources] == ["ENG", "OPS"]
    assert [s.sync.key for s in two.hosted.sources] == ["linear:ENG", "linear:OPS"]
    asked = [r.body["variables"]["filter"] for r in linear.requests if r.path.endswith("Issues")]
    assert [f["team"] for f in asked] == [{"key": {"eq": "ENG"}}, {"key": {"eq": "OPS"}}]
    assert all(f["and"] == [{"labels": {"some": {"name": {"eqIgnoreCase": READY}}}}] for f in asked)
    state = two.store.health.report()
    assert [(s.source, s.failing) for s in state.sources] == [("ENG", None), ("OPS", None)]


async def test_one_team_failing_leaves_the_other_syncing(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    """A team the token never read (GONE), then one deleted in Linear after its import
    (OPS, asked on each walk's first page): each fails its own source; ENG syncs on."""
    linear.add_team("OPS")
    linear.new_issue("still served")
    linear.new_issue("ops work", team="OPS")
    teams = ["ENG", "OPS", "GONE"]
    async with open_linear(linear, linear_url, tmp_path / "b", teams=teams) as ep:
        report = await ep.hosted.catch_up()
        assert sorted(t["taskId"] for t in await ep.all_tasks()) == ["ENG-1", "OPS-1"]
        assert any(line.startswith("GONE: failed") for line in report.lines)
        del linear.teams["OPS"]
        linear.new_issue("after the deletion")
        linear.advance(5)
        report = await ep.hosted.catch_up()
        assert [line.split(":")[0] for line in report.lines if "failed" in line] == [
            "OPS",
            "GONE",
        ]
        assert (await ep.client.get("ENG-2"))["title"] == "after the deletion"
        state = ep.store.health.report()
        failing = {s.source: s.failing for s in state.sources}
        assert failing["ENG"] is None
        assert "the team OPS does not read" in str(failing["OPS"])
        assert "the team GONE does not read" in str(failing["GONE"])
        assert not state.refused  # ready on the team that reads
        page = await ep.client.list_tasks()
        assert page["stale"]["reason"].startswith("Linear sync is failing: OPS")


async def test_the_horizon_is_pushed_into_the_import(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    """The sync reads the wall clock, so the fake's starts 40 days ago."""
    linear.advance(-40 * 86_400)
    linear.move(linear.new_issue("closed long ago"), "Done")
    linear.new_issue("open for long")
    linear.advance(35 * 86_400)
    linear.move(linear.new_issue("closed lately"), "Done")
    settings: dict[str, Any] = {"scope": {"horizon_days": 30}}
    async with open_linear(linear, linear_url, tmp_path / "b", **settings) as ep:
        await ep.poll()
        titles = sorted(t["title"] for t in await ep.all_tasks())
        asked = [r.body["variables"] for r in linear.requests if r.path.endswith("Issues")]
    assert titles == ["closed lately", "open for long"]
    (horizon,) = asked[0]["filter"]["and"]
    assert horizon["or"][0] == {"state": {"type": {"nin": ["canceled", "completed", "duplicate"]}}}
    assert asked[0]["facts"] is True  # each issue says when it closed (the local check)


@pytest.mark.parametrize("assignee", ["agent", "none"])
async def test_the_scopes_assignee_is_pushed_as_assignee_or_delegate(
    linear: FakeLinear,
    linear_url: str,
    agent: User,
    person: User,
    tmp_path: Path,
    presence: DictPresence,
    assignee: str,
) -> None:
    """The agent's account (assignee or delegate), or "none" (no one but a seat)."""
    linear.delegate_to(linear.new_issue("delegated to the agent"), agent)
    linear.assign(linear.new_issue("a person's"), person)
    linear.new_issue("nobody's")
    scope = {"assignee": agent.id if assignee == "agent" else "none"}
    async with with_seat(linear, linear_url, tmp_path, presence, agent, scope=scope) as ep:
        await ep.poll()
        titles = sorted(t["title"] for t in await ep.all_tasks())
    (asked,) = [r.body["variables"] for r in linear.requests if r.path.endswith("Issues")]
    wanted = ["delegated to the agent"] + (["nobody's"] if assignee == "none" else [])
    assert titles == wanted
    assert len(asked["filter"]["and"]) == (1 if assignee == "agent" else 2)


async def test_leaving_the_scope_drops_the_task_with_why_and_back_is_the_same_task(
    linear: FakeLinear, linear_url: str, agent: User, tmp_path: Path, presence: DictPresence
) -> None:
    """A label removed, then the project changed (Linear's own key, pushed into the
    import's filter, which alone never shows an issue leaving): dropped with why each
    time, the binding kept, and back in, the same task with its history."""
    linear.add_label(READY)
    linear.add_project("Agents")
    linear.add_project("Other")
    issue = labelled(linear, "ENG", "comes and goes")
    issue.project = "Agents"
    settings: dict[str, Any] = {"scope": {"labels": [READY]}, "project": "Agents"}
    async with with_seat(linear, linear_url, tmp_path, presence, agent, **settings) as ep:
        await ep.poll()
        await ep.client.claim(BUILDER, "ENG-1")
        sources = []
        changes: list[tuple[Callable[[], None], Callable[[], None]]] = [
            (lambda: linear.unlabel(issue, READY), lambda: linear.label(issue, READY)),
            (
                lambda: linear.set_project(issue, "Other"),
                lambda: linear.set_project(issue, "Agents"),
            ),
        ]
        for leave, back in changes:
            leave()  # a person's change
            linear.advance(5)
            await ep.poll()
            left = await ep.client.get("ENG-1")
            assert left["status"] == "dropped"
            assert left["binding"]["actor"] == BUILDER.actor  # the seat stays named
            sources.append(left["statusSource"])
            back()
            linear.advance(5)
            await ep.poll()
            again = await ep.client.get("ENG-1")
            assert (again["status"], again["statusSource"]) == ("claimed", "In Progress")
        assert sources == [f"out of scope: label {READY} missing", "out of scope: project Other"]
        history = await ep.store.history("ENG-1")
        assert [entry.status for entry in history] == [
            "open",
            "claimed",
            "dropped",
            "claimed",
            "dropped",
            "claimed",
        ]


async def test_a_seat_writing_on_an_issue_a_person_moved_out_hears_why(
    linear: FakeLinear, two: LinearEndpoint
) -> None:
    issue = labelled(linear, "ENG", "taken away")
    await two.poll()
    await two.client.claim(BUILDER, "ENG-1")
    linear.to_team(issue, "XYZ")  # a team outside the endpoint
    linear.advance(5)
    await two.sync.reconcile()  # no listing of ENG or OPS shows it any more
    left = await two.client.get("ENG-1")
    assert (left["status"], left["statusSource"]) == (
        "dropped",
        "out of scope: moved to team XYZ (XYZ-1)",
    )
    mark = len(linear.requests)
    error = await two.client.refused_update(
        ErrorCode.FAILED_PRECONDITION, BUILDER, "ENG-1", status="done"
    )
    assert "moved to team XYZ" in error.message
    assert (error.outcome, writes(linear, mark)) == ("not-executed", [])
    linear.to_team(issue, "ENG")  # back: ENG-2 in Linear, the task ENG-1 again
    linear.advance(5)
    await two.poll()
    assert (await two.client.get("ENG-1"))["status"] == "claimed"
    assert [t["taskId"] for t in await two.all_tasks()] == ["ENG-1"]


async def test_create_is_routed_to_its_team_with_the_scopes_labels(
    linear: FakeLinear, linear_url: str, agent: User, tmp_path: Path, presence: DictPresence
) -> None:
    """To create_team, with the scope's label and its account (an agent: delegated)."""
    linear.add_team("OPS")
    linear.add_label(READY)
    settings: dict[str, Any] = {
        "teams": ["ENG", "OPS"],
        "create_team": "OPS",
        "scope": {"labels": [READY], "assignee": agent.id},
    }
    async with with_seat(linear, linear_url, tmp_path, presence, agent, **settings) as ep:
        created = await ep.client.create("Routed work")
        (issue,) = linear.issues.values()
        assert (issue.identifier, issue.label_names) == ("OPS-1", [READY])
        assert (issue.delegate, issue.assignee) == (agent.id, None)
        assert created["taskId"] == "OPS-1"
        await ep.poll()
        assert (await ep.client.get("OPS-1"))["statusSource"] == "Todo"  # in the scope


async def test_a_note_with_an_agents_token_is_activity_of_its_session(
    linear: FakeLinear, linear_url: str, agent: User, tmp_path: Path, presence: DictPresence
) -> None:
    linear.oauth, linear.viewer = True, agent  # an actor=app OAuth token: the agent's
    issue = linear.new_issue("delegated work")
    async with with_seat(linear, linear_url, tmp_path, presence, agent, auth="oauth") as ep:
        await ep.poll()
        await ep.client.claim(BUILDER, "ENG-1")  # delegated: Linear opens a session
        (session,) = issue.sessions
        await ep.client.update(BUILDER, "ENG-1", note="Looking at the logs")
        await ep.client.update(BUILDER, "ENG-1", status="done", note="Fixed in abc123")
    kinds = [(kind, body.split("\n")[0].strip()) for kind, body in session.activities]
    assert kinds == [("thought", "Looking at the logs"), ("response", "Fixed in abc123")]
    assert issue.comments == []


@pytest.mark.parametrize(
    ("settings", "remedy"),
    [
        ({"team": "ENG", "labels": ["x"]}, "Write it under [endpoints.linear.scope]"),
        ({"team": "ENG", "teams": ["OPS"]}, "Keep one"),
        ({}, 'Set team = "ENG", or teams = ["OPS", "…"]'),
        ({"teams": ["ENG", "OPS"], "create_team": "XYZ"}, "Set it to one of ENG, OPS"),
        ({"team": "ENG", "create_team": "ENG", "route": "ENG"}, "Keep create_team"),
    ],
)
def test_team_settings_refused_name_the_remedy(settings: dict[str, Any], remedy: str) -> None:
    with pytest.raises(ValidationError) as refused:
        LinearConfig.model_validate(settings)
    assert remedy in str(refused.value)


def test_team_is_a_list_of_one() -> None:
    config = LinearConfig.model_validate({"team": "ENG"})
    assert (config.sources, config.location, config.routed) == (("ENG",), "ENG", "ENG")
