"""The sync against the fake Linear on loopback: Relay pages ordered by ``updatedAt``, the
workflow state types and names onto the five statuses, an agent delegated while a person
stays assigned, attachments as evidence, what an unchanged poll costs, and issues that
leave (trashed, archived, moved to another team, deleted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttpError
from tests.providers.linear._support import BUILDER, LinearEndpoint, open_linear
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import TEAM, User


def queries(fake: FakeLinear, since: int = 0, name: str = "Issues") -> list[str]:
    return [r.path for r in fake.requests[since:] if r.path == f"/graphql/{name}"]


async def test_an_import_walks_relay_pages_and_maps_every_issue(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    linear.bulk_issues(TEAM, 120)  # three pages of 50
    report = await ln.poll()
    assert (report.pages, report.issues) == (3, 120)
    tasks = await ln.all_tasks()
    assert sorted(t["taskId"] for t in tasks) == sorted(f"ENG-{n}" for n in range(1, 121))
    first = await ln.get(1)
    assert (first["status"], first["statusSource"]) == ("open", "Todo")
    assert first["brief"].startswith("Seen in build")
    pages = [r.body["variables"] for r in linear.requests if r.path == "/graphql/Issues"]
    assert [p["after"] is None for p in pages] == [True, False, False]
    assert {p["orderBy"] for p in pages} == {"updatedAt"}
    assert pages[0]["filter"] == {"team": {"key": {"eq": "ENG"}}}


async def test_an_unchanged_poll_costs_one_small_query(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    linear.bulk_issues(TEAM, 60, spacing_s=1)  # the last few are within the overlap
    await ln.poll()
    linear.clock.advance(120)
    mark = len(linear.requests)
    report = await ln.poll()
    assert report.changed == 0
    assert [r.path for r in linear.requests[mark:]] == ["/graphql/Issues"]
    (asked,) = [r.body["variables"] for r in linear.requests[mark:]]
    assert "updatedAt" in asked["filter"]  # only what changed since the cursor
    assert linear.complexities[-1] * 4 < linear.complexities[0]  # a small first page


async def test_state_types_map_to_the_five_statuses_with_the_state_name(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    cases = {
        "Triage": ("open", "Triage"),
        "Backlog": ("open", "Backlog"),
        "Todo": ("open", "Todo"),
        "In Progress": ("open", "In Progress"),  # started, but no seat is bound
        "Done": ("done", "Done"),
        "Canceled": ("dropped", "Canceled"),
        "Duplicate": ("dropped", "Duplicate"),
    }
    made = {name: linear.new_issue(f"in {name}", state=name) for name in cases}
    await ln.poll()
    for name, issue in made.items():
        task = await ln.get(issue.number)
        assert (task["status"], task["statusSource"]) == cases[name], name


async def test_a_delegated_agent_binds_its_seat_while_a_person_stays_assigned(
    linear: FakeLinear, ln: LinearEndpoint, agent: User, person: User
) -> None:
    issue = linear.new_issue("agent work")
    linear.assign(issue, person)
    linear.delegate_to(issue, agent)
    linear.move(issue, "In Progress")
    await ln.poll()
    task = await ln.get(issue.number)
    assert task["status"] == "claimed"
    assert (task["binding"]["owner"], task["binding"]["actor"]) == (BUILDER.owner, BUILDER.actor)
    linear.delegate_to(issue, None)  # a person takes the agent off it
    await ln.poll()
    task = await ln.get(issue.number)
    assert (task["status"], task["statusSource"], task.get("binding")) == (
        "open",
        "In Progress",
        None,
    )


async def test_a_person_assigned_alone_is_never_a_binding(
    linear: FakeLinear, ln: LinearEndpoint, person: User
) -> None:
    issue = linear.new_issue("people work")
    linear.assign(issue, person)
    linear.move(issue, "In Progress")
    await ln.poll()
    task = await ln.get(issue.number)
    assert (task["status"], task.get("binding")) == ("open", None)


async def test_blocked_by_label_or_state_needs_a_bound_seat(
    linear: FakeLinear, ln: LinearEndpoint, agent: User
) -> None:
    labelled = linear.new_issue("labelled")
    linear.label(labelled, "Blocked")
    stuck = linear.new_issue("stuck", state="Blocked")
    linear.delegate_to(stuck, agent)
    await ln.poll()
    assert (await ln.get(labelled.number))["status"] == "open"
    task = await ln.get(stuck.number)
    assert (task["status"], task["statusSource"]) == ("blocked", "Blocked")


async def test_attachments_of_github_and_gitlab_are_evidence_of_their_repositories(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    issue = linear.new_issue("linked")
    linear.attach(issue, "https://github.com/acme/widgets/pull/12")
    linear.attach(issue, "https://github.com/acme/widgets/commit/" + "a" * 40)
    linear.attach(issue, "https://gitlab.com/acme/infra/-/merge_requests/3")
    linear.attach(issue, "https://www.figma.com/file/xyz")  # not evidence
    await ln.poll()
    task = await ln.get(issue.number)
    assert [(e["kind"], e["ref"]) for e in task["evidence"]] == [
        ("review", "https://github.com/acme/widgets/pull/12"),
        ("commit", "acme/widgets@" + "a" * 40),
        ("review", "https://gitlab.com/acme/infra/-/merge_requests/3"),
    ]


async def test_trashed_archived_moved_and_deleted_issues_become_visible_states(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    linear.add_team("OPS")
    trashed, archived, moved, deleted = (linear.new_issue(f"issue {k}") for k in range(4))
    await ln.poll()
    linear.trash(trashed)
    linear.move(archived, "Done")
    linear.archive(archived)
    linear.to_team(moved, "OPS")
    linear.delete(deleted)
    linear.clock.advance(10)
    await ln.poll()
    assert [(await ln.get(trashed.number))[k] for k in ("status", "statusSource")] == [
        "dropped",
        "trashed",
    ]
    done = await ln.get(archived.number)
    assert (done["status"], done["statusSource"]) == ("done", "Done (archived)")
    # A move to a team the endpoint does not sync, and a deletion, leave no trace a
    # listing of its teams shows: the reconcile sweep reads them one by one. The move
    # takes the issue out of the endpoint's scope (the leave rule of every tracker).
    await ln.sync.reconcile()
    left = await ln.get(3)
    assert (left["status"], left["statusSource"]) == (
        "dropped",
        "out of scope: moved to team OPS (OPS-1)",
    )
    gone = await ln.get(4)
    assert (gone["status"], gone["statusSource"], gone["title"]) == (
        "dropped",
        "deleted",
        "issue 3",
    )


async def test_a_move_between_synced_teams_keeps_the_task_id_and_its_binding(
    linear: FakeLinear, linear_url: str, tmp_path: Path, agent: User
) -> None:
    """A task id is stable for the task's life: ENG-1 moved to OPS (OPS-1 in Linear) is
    still the task ENG-1, read by the OPS team's sync, written to by its old identifier
    (Linear answers for it), and no second task appears."""
    linear.add_team("OPS").next_number = 40
    issue = linear.new_issue("wandering")
    seats = {agent.id: BUILDER.principal}
    async with open_linear(
        linear, linear_url, tmp_path / "b", teams=["ENG", "OPS"], seats=seats
    ) as both:
        await both.poll()
        await both.client.claim(BUILDER, "ENG-1")
        linear.to_team(issue, "OPS")
        linear.set_title(issue, "wandering, now in OPS")
        linear.advance(5)
        await both.poll()
        moved = await both.client.get("ENG-1")
        assert (moved["status"], moved["title"]) == ("claimed", "wandering, now in OPS")
        assert [t["taskId"] for t in await both.all_tasks()] == ["ENG-1"]
        await both.client.update(BUILDER, "ENG-1", status="done")
    assert (issue.identifier, issue.state.type) == ("OPS-40", "completed")


async def test_a_rate_limited_answer_waits_for_the_spent_budgets_reset(
    linear: FakeLinear, ln: LinearEndpoint
) -> None:
    linear.new_issue("one")
    linear.set_rate_limit(0, reset_in=30)
    clock = ln.virtual_time()
    await ln.poll()
    assert clock.waits
    assert 29 <= clock.waits[0] <= 31
    budgets = {b.resource: b for b in ln.hosted.http.rate_budgets.values()}
    assert set(budgets) == {"requests", "complexity"}
    assert budgets["requests"].limit == 5000
    assert (await ln.get(1))["title"] == "one"


@pytest.mark.parametrize("key", ["TOOLONGKEY", "eng", "1ENG"])
def test_a_team_key_outside_linears_shape_is_refused(key: str) -> None:
    from pydantic import ValidationError

    from cotal_tasks.providers.linear.config import LinearConfig

    with pytest.raises(ValidationError):
        LinearConfig.model_validate({"teams": [key]})


async def test_a_team_that_does_not_read_is_refused_never_an_empty_board(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    linear.new_issue("one")
    async with open_linear(linear, linear_url, tmp_path / "b", teams=["ENG", "NOPE"]) as ep:
        with pytest.raises(TrackerHttpError) as failed:
            await ep.poll()
        assert failed.value.status == 404
        assert "NOPE" in failed.value.message
        page = await ep.client.list_tasks()
        assert page["stale"]["reason"].startswith("Linear sync is failing")


async def test_a_walk_cut_short_by_a_rate_limit_resumes_at_its_next_page(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    linear.bulk_issues(TEAM, 120)
    # no reserve for seats' writes: the walk spends the budget down to its floor
    settings = {"max_rate_limit_wait_s": 60, "rate_reserve": 0}
    async with open_linear(linear, linear_url, tmp_path / "b", **settings) as ep:
        ep.virtual_time()
        linear.set_rate_limit(2, reset_in=3600)
        with pytest.raises(RateLimited):
            await ep.poll()
        saved = await ep.sync.checkpoint()
        assert saved.get("cursor") is None  # newest first: the cursor waits for the end
        assert len(await ep.all_tasks()) == 100
        linear.advance(3600)
        mark = len(linear.requests)
        report = await ep.poll()
        (resumed,) = [r.body["variables"] for r in linear.requests[mark:]]
        assert resumed["after"] == saved["walk"]["after"]  # its next page, not the first
        assert report.issues == 20
        assert len(await ep.all_tasks()) == 120
        assert (await ep.sync.checkpoint())["cursor"] is not None
