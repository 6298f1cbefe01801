"""Issue → task through a real sync: the five statuses and ``statusSource`` from state,
``state_reason`` and labels (default and configured rule lists), and bindings that come
only from the seat directory plus a fresh presence uid, never from a human assignee."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.bridge._support import DictPresence, bound_triple, triple
from tests.conftest import seat
from tests.providers.github._support import (
    BUILDER,
    HUMAN,
    REPO,
    SEAT_LOGIN,
    GitHubEndpoint,
    open_github,
)
from tests.support.fake_github import FakeGitHub

Json = dict[str, object]


@dataclass(frozen=True)
class Case:
    title: str
    status: str  # the expected task status
    source: str  # the expected statusSource
    bound: bool  # a binding to BUILDER is expected
    state: str = "open"
    reason: str | None = None
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()


BLOCKED, DOING = ("blocked",), ("in-progress",)
A_SEAT, A_HUMAN = (SEAT_LOGIN,), (HUMAN,)
CASES = (
    Case("plain open", "open", "open", False),
    Case("reopened", "open", "open", False, reason="reopened"),
    Case("closed as completed", "done", "closed", False, "closed", "completed"),
    Case("closed as not planned", "dropped", "closed/not_planned", False, "closed", "not_planned"),
    Case("closed as duplicate", "dropped", "closed/duplicate", False, "closed", "duplicate"),
    Case("blocked label, nobody", "open", "blocked", False, labels=BLOCKED),
    Case("blocked label, a human", "open", "blocked", False, labels=BLOCKED, assignees=A_HUMAN),
    Case("blocked label, a seat", "blocked", "blocked", True, labels=BLOCKED, assignees=A_SEAT),
    Case("Blocked, any case", "blocked", "Blocked", True, labels=("Blocked",), assignees=A_SEAT),
    Case("in-progress, nobody", "open", "in-progress", False, labels=DOING),
    Case("in-progress, a human", "open", "in-progress", False, labels=DOING, assignees=A_HUMAN),
    Case("in-progress, a seat", "claimed", "in-progress", True, labels=DOING, assignees=A_SEAT),
    Case("a seat, no label", "claimed", "open", True, assignees=A_SEAT),
    Case("a human and a seat", "claimed", "open", True, assignees=(HUMAN, SEAT_LOGIN)),
    Case("a human only", "open", "open", False, assignees=A_HUMAN),
    Case("done by a seat", "done", "closed", True, "closed", "completed", assignees=A_SEAT),
    Case(
        "dropped, blocked", "dropped", "closed/not_planned", False, "closed", "not_planned", BLOCKED
    ),
)


async def test_default_rules_map_state_reason_and_labels(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    gh.presence.put(BUILDER, environment="k8s://team-7")
    for case in CASES:
        fake.add_issue(
            REPO,
            case.title,
            state=case.state,
            state_reason=case.reason,
            labels=case.labels,
            assignees=case.assignees,
        )
    legacy = fake.add_issue(REPO, "closed before state_reason existed", state="closed")
    fake.issue(REPO, int(str(legacy["number"]))).state_reason = None

    await gh.poll()

    wrong: list[tuple[str, object, object, bool]] = []
    for number, case in enumerate(CASES, start=1):
        task = await gh.get(number)
        assert task["title"] == case.title
        if (task["status"], task["statusSource"], "binding" in task) != (
            case.status,
            case.source,
            case.bound,
        ):
            wrong.append((case.title, task["status"], task["statusSource"], "binding" in task))
        if case.bound:
            assert bound_triple(task) == triple(BUILDER)
            assert task["binding"]["boundBy"] == "tracker-sync"
            assert "environment" not in task["binding"]  # a sync binding names no environment
    assert wrong == []
    legacy_task = await gh.get(len(CASES) + 1)
    assert (legacy_task["status"], legacy_task["statusSource"]) == ("done", "closed")


async def test_a_seat_without_a_fresh_presence_card_is_not_bound(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    presence = DictPresence()
    presence.put(BUILDER, environment=None, fresh=False)  # the card is stale
    async with open_github(fake, github_url, tmp_path / "b", presence=presence) as gh:
        fake.add_issue(REPO, "stale card", labels=["in-progress"], assignees=[SEAT_LOGIN])
        await gh.poll()
        task = await gh.get(1)
        assert (task["status"], task["statusSource"]) == ("open", "in-progress")
        assert "binding" not in task

        presence.cards.clear()  # no card at all
        fake.advance(5)
        fake.add_issue(REPO, "no card", labels=["in-progress"], assignees=[SEAT_LOGIN])
        await gh.poll()
        assert "binding" not in await gh.get(2)
        assert presence.lookups, "the sync never asked the presence port"


async def test_a_new_incarnation_never_takes_over_a_sync_binding(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    gh.presence.put(BUILDER, environment=None)
    fake.add_issue(REPO, "Bound by assignment", labels=["in-progress"], assignees=[SEAT_LOGIN])
    await gh.poll()
    first = await gh.get(1)
    assert bound_triple(first) == triple(BUILDER)

    reborn = seat("builder", 2)  # the same principal, a fresh lifecycle uid
    gh.presence.put(reborn, environment=None)
    fake.advance(30)
    fake.set_title(fake.issue(REPO, 1), "Bound by assignment, retitled", HUMAN)
    await gh.poll()

    again = await gh.get(1)
    assert again["title"] == "Bound by assignment, retitled"
    assert again["binding"] == first["binding"]
    assert (await gh.client.my_tasks(reborn))["tasks"] == []


async def test_unassigning_the_seat_on_github_clears_the_binding(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    gh.presence.put(BUILDER, environment=None)
    fake.add_issue(REPO, "Assigned", assignees=[SEAT_LOGIN])
    await gh.poll()
    assert (await gh.get(1))["status"] == "claimed"
    fake.advance(30)
    fake.remove_assignees(fake.issue(REPO, 1), [SEAT_LOGIN], HUMAN)
    await gh.poll()
    task = await gh.get(1)
    assert (task["status"], task["statusSource"]) == ("open", "open")
    assert "binding" not in task


async def test_a_seat_without_an_account_keeps_its_endpoint_binding(gh: GitHubEndpoint) -> None:
    """A seat the directory does not map can claim; GitHub only carries the label, and
    a later sync of the issue keeps the binding (only the endpoint can unbind it)."""
    fake = gh.fake
    worker = seat("worker", 5)
    fake.add_issue(REPO, "Claimed through the endpoint")
    await gh.poll()
    claimed = await gh.client.claim(worker, "octo-org/hello-world#1")
    fake.advance(30)
    fake.add_labels(fake.issue(REPO, 1), ["bug"], HUMAN)
    await gh.poll()
    task = await gh.get(1)
    assert task["binding"] == claimed["binding"]
    assert task["status"] == "claimed"
    assert fake.issue(REPO, 1).assignees == []


async def test_configured_rules_are_ordered_and_first_match_wins(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    rules = [
        {"status": "dropped", "label": "wontfix"},
        {"status": "blocked", "state": "open", "label": "waiting"},
        {"status": "dropped", "state": "closed", "state_reasons": ["not_planned"]},
        {"status": "done", "state": "closed"},
        {"status": "claimed", "state": "open", "label": "doing"},
        {"status": "open"},
    ]
    presence.put(BUILDER, environment=None)
    labels = {"claimed_label": "doing", "blocked_label": "waiting"}  # what write-back writes
    async with open_github(
        fake, github_url, tmp_path / "b", presence=presence, status_rules=rules, **labels
    ) as gh:
        fake.add_issue(REPO, "open but wontfix", labels=["wontfix", "waiting"])
        fake.add_issue(REPO, "closed and wontfix", state="closed", labels=["wontfix"])
        fake.add_issue(REPO, "waiting, seat", labels=["waiting", "doing"], assignees=[SEAT_LOGIN])
        fake.add_issue(REPO, "doing, nobody", labels=["doing"])
        fake.add_issue(REPO, "closed not planned", state="closed", state_reason="not_planned")
        fake.add_issue(REPO, "blocked is not a rule here", labels=["blocked"])
        await gh.poll()
        got = [
            ((t := await gh.get(n))["status"], t["statusSource"], "binding" in t)
            for n in range(1, 7)
        ]
    assert got == [
        ("dropped", "wontfix", False),
        ("dropped", "wontfix", False),
        ("blocked", "waiting", True),
        ("open", "doing", False),
        ("dropped", "closed/not_planned", False),
        ("open", "open", False),
    ]
