"""Edits that move no issue's ``updated_at``, so no poll sees them, delivered to a running
bridge (a real broker, its own sync loop with a 60 s poll interval): a label renamed or
deleted (``label``), and a Projects v2 card moved (``projects_v2_item``, an organisation's
delivery naming the issue by node id). Each wakes the refresh of the issues it changes,
long before the next poll, and the refresh reads the card's Projects v2 Status."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.bridge._support import Client, DictPresence
from tests.providers.github._support import (
    ISSUES,
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    GitHubMesh,
    fetched_issue_numbers,
    github_mesh,
    list_requests,
    open_github,
    task_id,
)
from tests.providers.hosted_support import add_issues
from tests.support.fake_github import FakeGitHub, signed_webhook
from tests.support.fake_github_webhooks import label_payload, projects_v2_item_payload
from tests.support.polling import eventually

Json = dict[str, object]
OTHER = "octo-org/elsewhere"


async def deliver(
    mesh: GitHubMesh, event: str, payload: Json, *, delivery: str | None = None
) -> httpx.Response:
    body, headers = signed_webhook(WEBHOOK_SECRET, event, payload, delivery=delivery)
    async with httpx.AsyncClient(base_url=str(mesh.bridge.http_url)) as http:
        return await http.post("/webhooks/github", content=body, headers=headers)


async def record(mesh: GitHubMesh, number: int) -> dict[str, object]:
    return dict(await Client(mesh.endpoint.service, mesh.endpoint.store).get(task_id(number)))


async def reaches(mesh: GitHubMesh, number: int, source: str, within_s: float = 5.0) -> float:
    """Waits until issue ``number``'s task has ``statusSource`` ``source`` (the rule
    that decided its status: with no seat bound, ``blocked`` and ``claimed`` read as
    ``open``, the native value kept there); the seconds it took."""

    async def there() -> bool:
        return (await record(mesh, number))["statusSource"] == source

    return await eventually(there, within_s, what=f"issue {number}'s task from {source}")


def seed(fake: FakeGitHub) -> None:
    """Five issues; #2 and #3 carry ``blocked`` (the default rules' blocked label)."""
    for k in range(1, 6):
        fake.add_issue(REPO, f"Issue {k}", labels=["blocked"] if k in (2, 3) else ())
        fake.advance(10)


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> dict[str, object]:
    """What a test adds to its endpoint's settings (``indirect`` parametrization)."""
    return dict(getattr(request, "param", {}))


def with_settings(**overrides: object) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("settings", [overrides], indirect=True, ids=[""])


@pytest.fixture
async def hooked(
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, object],
) -> AsyncIterator[GitHubMesh]:
    """A running bridge syncing ``seed``'s issues with its webhook secret set."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    seed(fake)
    overrides = settings
    async with github_mesh(
        tmp_path, fake, github_url, webhook_secret_env=SECRET_ENV, **overrides
    ) as mesh:
        assert mesh.bridge.http_url is not None
        assert (await record(mesh, 2))["statusSource"] == "blocked"
        yield mesh


def labelled_listings(fake: FakeGitHub, since: int) -> list[dict[str, str]]:
    return [r.query for r in list_requests(fake, since) if "labels" in r.query]


def full_listings(fake: FakeGitHub, since: int) -> list[dict[str, str]]:
    """Listings asked from the start: no ``since``, no label filter, no validator."""
    return [
        r.query
        for r in list_requests(fake, since)
        if "since" not in r.query and "labels" not in r.query and not r.if_none_match
        if r.query.get("per_page") == "100"
    ]


async def test_a_renamed_label_refreshes_the_issues_carrying_it(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.rename_label(REPO, "blocked", "on-hold")  # no rule reads on-hold: open
    mark = len(fake.requests)
    payload = label_payload(fake, "edited", REPO, "on-hold", changes={"name": {"from": "blocked"}})

    answer = await deliver(hooked, "label", payload)

    assert (answer.status_code, answer.json()) == (
        202,
        {"message": "accepted; 2 issue(s) to refresh"},
    )
    took = max([await reaches(hooked, 2, "open"), await reaches(hooked, 3, "open")])
    assert took < 5 < hooked.hosted.tracker_config.poll_interval_s
    assert labelled_listings(fake, mark) == [
        {"labels": "on-hold", "state": "all", "per_page": "21"}  # webhook_max_issues + 1
    ]
    assert sorted(fetched_issue_numbers(fake, mark)) == [2, 3]
    assert (await record(hooked, 1))["statusSource"] == "open"


async def test_label_edits_no_rule_reads_read_nothing(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.add_issue(REPO, "Buggy", labels=["bug"])
    fake.rename_label(REPO, "bug", "defect")
    mark = len(fake.requests)
    recoloured = label_payload(fake, "edited", REPO, "blocked", changes={"color": {"from": "f"}})
    renamed = label_payload(fake, "edited", REPO, "defect", changes={"name": {"from": "bug"}})
    deleted = label_payload(fake, "deleted", REPO, "defect")

    answers = [await deliver(hooked, "label", p) for p in (recoloured, renamed, deleted)]

    assert [a.json() for a in answers] == [{"message": "accepted; 0 issue(s) to refresh"}] * 3
    assert fake.requests[mark:] == []


@with_settings(webhook_max_issues=1)
async def test_a_rename_past_the_bound_reads_every_issue_once(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.rename_label(REPO, "blocked", "on-hold")
    mark = len(fake.requests)
    payload = label_payload(fake, "edited", REPO, "on-hold", changes={"name": {"from": "blocked"}})

    answer = await deliver(hooked, "label", payload)

    assert answer.status_code == 202
    assert "the next poll reads every issue again" in answer.json()["message"]
    await reaches(hooked, 2, "open")
    await reaches(hooked, 3, "open")
    assert labelled_listings(fake, mark) == [{"labels": "on-hold", "state": "all", "per_page": "2"}]
    assert len(full_listings(fake, mark)) == 1  # one listing from the start, not a refresh each

    # Read through, the request is cleared: the next poll is the usual conditional one.
    from cotal_tasks.providers.hosted.sync import REREAD

    sync = hooked.hosted.sync

    async def cleared() -> bool:
        return not await sync.checkpoints.load(sync.key + REREAD)

    await eventually(cleared, 5, what="the re-read request cleared")
    after = len(fake.requests)
    await hooked.hosted.sync.poll_once()
    assert full_listings(fake, after) == []


async def test_a_deleted_label_reads_every_issue_again(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    payload = label_payload(fake, "deleted", REPO, "blocked")
    fake.delete_label(REPO, "blocked")
    mark = len(fake.requests)

    answer = await deliver(hooked, "label", payload)

    assert answer.status_code == 202
    await reaches(hooked, 2, "open")
    await reaches(hooked, 3, "open")
    assert len(full_listings(fake, mark)) == 1
    assert not any(r.matches("GET", f"{ISSUES}/*") for r in fake.requests[mark:])


@with_settings(project_status=True)
async def test_a_moved_card_refreshes_its_issue_with_its_status(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.move_card(REPO, 4, "In Progress")  # the issue's updated_at does not move
    mark = len(fake.requests)

    answer = await deliver(
        hooked, "projects_v2_item", projects_v2_item_payload(fake, "edited", REPO, 4)
    )

    assert (answer.status_code, answer.json()) == (
        202,
        {"message": "accepted; 1 issue(s) to refresh"},
    )
    took = await reaches(hooked, 4, "In Progress")
    assert took < 5 < hooked.hosted.tracker_config.poll_interval_s
    assert fetched_issue_numbers(fake, mark) == [4]
    assert list_requests(fake, mark) == []  # a refresh, not a poll

    fake.move_card(REPO, 4, "Blocked")
    again = projects_v2_item_payload(fake, "reordered", REPO, 4)
    assert (await deliver(hooked, "projects_v2_item", again)).status_code == 202
    await reaches(hooked, 4, "Blocked")


@with_settings(project_status=True)
async def test_cards_of_no_synced_issue_are_refused_as_unsynced_repositories(
    hooked: GitHubMesh,
) -> None:
    fake = hooked.fake
    fake.add_repo(OTHER)
    fake.add_issue(OTHER, "Not ours")
    fake.move_card(OTHER, 1, "In Progress")
    mark = len(fake.requests)
    elsewhere = await deliver(
        hooked, "projects_v2_item", projects_v2_item_payload(fake, "edited", OTHER, 1)
    )
    draft = projects_v2_item_payload(fake, "created", REPO, 5, content_type="DraftIssue")
    drafted = await deliver(hooked, "projects_v2_item", draft)

    unsynced = {
        "message": "no endpoint of this bridge syncs that repository. Point the webhook at "
        "the bridge that syncs it, or add an endpoint for the repository"
    }
    assert (elsewhere.status_code, elsewhere.json()) == (404, unsynced)
    assert (drafted.status_code, drafted.json()) == (404, unsynced)
    assert fetched_issue_numbers(fake, mark) == []
    forged = projects_v2_item_payload(fake, "edited", REPO, 4)
    body, headers = signed_webhook("another secret altogether", "projects_v2_item", forged)
    async with httpx.AsyncClient(base_url=str(hooked.bridge.http_url)) as http:
        refused = await http.post("/webhooks/github", content=body, headers=headers)
    assert refused.status_code == 401


@with_settings(project_status=True)
async def test_a_card_redelivered_is_acknowledged_once(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.move_card(REPO, 4, "In Progress")
    payload = projects_v2_item_payload(fake, "edited", REPO, 4)
    first = await deliver(hooked, "projects_v2_item", payload, delivery="card-1")
    await reaches(hooked, 4, "In Progress")

    mark = len(fake.requests)
    again = await deliver(hooked, "projects_v2_item", payload, delivery="card-1")

    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json() == {"message": "delivery already received"}
    # before: the redelivery asked GraphQL for the card's issue before its id was checked
    assert not any(r.path.endswith("graphql") for r in fake.requests[mark:])


async def test_a_label_rename_redelivered_costs_no_listing(hooked: GitHubMesh) -> None:
    fake = hooked.fake
    fake.rename_label(REPO, "blocked", "on-hold")
    payload = label_payload(fake, "edited", REPO, "on-hold", changes={"name": {"from": "blocked"}})
    first = await deliver(hooked, "label", payload, delivery="label-1")
    mark = len(fake.requests)
    again = await deliver(hooked, "label", payload, delivery="label-1")
    assert (first.status_code, again.status_code) == (202, 200)
    assert labelled_listings(fake, mark) == []  # before: the listing was asked again


@with_settings(project_status=True)
async def test_a_card_whose_issue_graphql_cannot_resolve_asks_for_a_redelivery(
    hooked: GitHubMesh,
) -> None:
    fake = hooked.fake
    fake.move_card(REPO, 4, "In Progress")
    payload = projects_v2_item_payload(fake, "edited", REPO, 4)
    fake.graphql_answers.append({"data": None, "errors": [{"message": "Bad credentials"}]})

    refused = await deliver(hooked, "projects_v2_item", payload, delivery="card-2")

    assert refused.status_code == 503
    assert refused.json()["message"].startswith("GitHub did not say which issues")
    assert (await record(hooked, 4))["statusSource"] == "open"
    redelivered = await deliver(hooked, "projects_v2_item", payload, delivery="card-2")
    assert redelivered.status_code == 202  # the refused delivery was not recorded
    await reaches(hooked, 4, "In Progress")


async def test_a_reread_asked_is_one_poll_from_the_start_on_either_mirror(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence, mirror_url: str
) -> None:
    """The request lives beside the checkpoint (shared by the instances on PostgreSQL):
    the next poll walks the listing from the start, asking no validator, and clears it."""
    seed(fake)
    # A hundred issues after them: the last page of the listing, which a changed poll's
    # conditional request brings, starts after #2 and #3.
    add_issues(fake, REPO, 100, spacing_s=1)
    async with open_github(
        fake, github_url, tmp_path / "b", presence=presence, database=mirror_url
    ) as gh:
        await gh.poll()
        await gh.poll()
        fake.delete_label(REPO, "blocked")  # no updated_at moves: the poll sees nothing
        mark = len(fake.requests)
        assert (await gh.poll()).changed == 0
        assert full_listings(fake, mark) == []
        assert (await gh.get(2))["statusSource"] == "blocked"

        await gh.sync.ask_reread()
        mark = len(fake.requests)
        report = await gh.poll()

        assert (report.not_modified, report.issues, report.changed) == (False, 105, 2)
        assert len(full_listings(fake, mark)) == 1
        assert (await gh.get(2))["statusSource"] == "open"
        mark = len(fake.requests)
        await gh.poll()
        assert full_listings(fake, mark) == []  # read through: cleared
