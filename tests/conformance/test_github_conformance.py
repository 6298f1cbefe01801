"""Section 6 of the tasks endpoint contract against a GitHub-backed endpoint, over the
real wire: a nats-server, the real bridge serving a ``provider = "github"`` endpoint
whose store is a mirror of the fake GitHub (served on loopback), and callers speaking
the wire. Each check runs the conformance runner's own check (``section6.passes``, the
one ``cotal-tasks conformance`` and the board suite run, so they cannot drift), then
asserts what GitHub itself was made to hold.
Checks 18 to 24 assert their steps of one run of the positive path, run once.

The seat directory maps two of the callers the checks use to GitHub accounts
(``local.worker`` → ``octobot``, ``local.w`` → ``hubot``), so claims by those seats
assign on GitHub and the others only label.

What holds, what differs, and why (nothing is skipped; where a check cannot hold as
written, a test asserts the documented alternative):

- Checks 1, 2, 4 to 9, 11, 12 and 14 to 24 hold as written. Check 2 and every read
  wait for the first sync: before it, reads carry ``stale`` ("the first GitHub sync has
  not finished"), which is the honest answer, not an empty board.
- Check 3 ("store made unreadable") applies to the mirror, which is the store reads
  come from: spoiled, reads fail ``unavailable`` (holds). GitHub itself failing is not
  a store failure: reads keep answering from the mirror and carry ``stale`` naming the
  failing sync (``test_check_03_github_failing_reads_stale_not_empty``).
- Check 9's broker half never reaches a provider; it runs here on a permissioned
  broker with a GitHub-backed bridge started under exactly its ``--serve`` rows.
- Check 10 holds: the original ``lifecycleUid`` is kept, also across a sync of the
  issue while GitHub still shows the seat's account assigned.
- Check 14 holds: the envelope id is recorded in the mirror; GitHub gets one issue.
- What GitHub cannot hold: a binding's ``lifecycleUid``, ``boundBy``, ``boundAt`` and
  ``environment`` (GitHub has an assignee login, and only for seats in the directory),
  evidence of kind ``run`` and evidence written by ``update-task`` (posted as a comment,
  which the sync does not read back). These live in the mirror only, so checks 10, 11,
  20 and 21 hold through the mirror; a fresh mirror re-imported from GitHub cannot
  restore them (``test_what_github_cannot_hold_is_lost_by_a_fresh_import``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance.test_section6 as section6
from cotal_tasks.bridge.config import EndpointConfig
from tests.bridge._support import DictPresence
from tests.conformance import hosted
from tests.conformance.conftest import SMALL_PAGE_CEILING
from tests.conformance.hosted import Tracker
from tests.conformance.test_section6 import (
    COMMIT_REF,
    RUN_REF,
    claim,
    create,
    get,
    list_page,
    refusal,
)
from tests.conftest import seat
from tests.providers.github._support import (
    REPO,
    TOKEN_ENV,
    GitHubMesh,
    github_config,
    github_mesh,
    open_github,
)
from tests.support.bridge import ENDPOINT
from tests.support.fake_github import FakeGitHub, RecordedRequest, serve_fake_github
from tests.support.fake_github_model import Issue
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
SEATS = {"octobot": "local.worker", "hubot": "local.w"}
ISSUES = f"/repos/{REPO}/issues"


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(assignable=list(SEATS))


@pytest.fixture(autouse=True)
def github_token(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, fake.token)


@pytest.fixture
async def github_url(fake: FakeGitHub) -> AsyncIterator[str]:
    async with serve_fake_github(fake) as url:
        yield url


@pytest.fixture
async def mesh(tmp_path: Path, fake: FakeGitHub, github_url: str) -> AsyncIterator[GitHubMesh]:
    async with github_mesh(tmp_path, fake, github_url, seats=SEATS) as running:
        yield running


def issue_titled(fake: FakeGitHub, title: str) -> Issue:
    (issue,) = [i for i in fake.repos[REPO].issues.values() if i.title == title]
    return issue


def writes_to(fake: FakeGitHub, issue: Issue) -> list[RecordedRequest]:
    """Writes to one issue after its creation (labels, assignees, PATCH, comments)."""
    base = f"{ISSUES}/{issue.number}"
    return [r for r in fake.writes if r.path == base or r.path.startswith(base + "/")]


def shape(requests: list[RecordedRequest]) -> list[tuple[str, str]]:
    return [(r.method, r.path.removeprefix(ISSUES)) for r in requests]


def labels_titled(fake: FakeGitHub, title: str) -> list[str]:
    return issue_titled(fake, title).labels


TRACKER = Tracker(
    provider="github",
    section=lambda api_url: (
        f'provider = "github"\n[endpoints.github]\nrepository = "{REPO}"\n'
        f'api_url = "{api_url}"\ntoken_env = "{TOKEN_ENV}"\n'
    ),
    endpoint=lambda api_url: EndpointConfig(name=ENDPOINT, settings=github_config(api_url)),
    labels_of=labels_titled,
    claimed="in-progress",
)


# -- 1 to 17 -----------------------------------------------------------------------------


async def test_check_01_describe_lists_eight_commands(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "01")


async def test_check_02_list_tasks_on_empty_board(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "02")
    (listing,) = mesh.fake.calls("GET", ISSUES)  # the empty board is an empty repository
    assert listing.status == 200


async def test_check_03_unreadable_store_is_unavailable(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "03")


async def test_check_03_github_failing_reads_stale_not_empty(mesh: GitHubMesh) -> None:
    """The alternative for the tracker itself: reads come from the mirror, marked stale."""
    reader = mesh.caller("reader")
    task = await create(reader, "Still here while GitHub refuses us")
    assert "stale" not in await list_page(reader)
    mesh.fake.token = "ghp_rotated000000000000000000000000000000"  # our token is revoked
    with pytest.raises(Exception, match="401"):
        await mesh.poll()
    page = await list_page(reader)
    assert [t["taskId"] for t in page["tasks"]] == [task["taskId"]]
    assert page["stale"]["reason"].startswith("GitHub sync is failing: ")
    assert "401" in page["stale"]["reason"]
    assert page["stale"]["staleAsOf"] > 0
    assert await get(reader, task["taskId"]) == task


async def test_check_04_get_absent_task_is_not_found(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "04")
    reply = await mesh.caller("reader").call("get-task", {"taskId": f"{REPO}#999"})
    assert refusal(reply)[0] == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "05")


async def test_check_06_claim_binds_caller_and_repeats_same_record(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "06")
    issue = issue_titled(mesh.fake, "Claim me")
    assert (issue.assignees, issue.labels) == (["octobot"], ["in-progress"])
    n = issue.number
    # The repeated claim wrote nothing to GitHub.
    assert shape(writes_to(mesh.fake, issue)) == [
        ("POST", f"/{n}/assignees"),
        ("POST", f"/{n}/labels"),
    ]


async def test_check_07_claim_of_foreign_task_is_conflict(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "07")
    issue = issue_titled(mesh.fake, "Contested")
    assert shape(writes_to(mesh.fake, issue)) == [("POST", f"/{issue.number}/labels")]


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(
    mesh: GitHubMesh,
) -> None:
    await section6.passes(mesh, "08")
    issue = issue_titled(mesh.fake, "Not yours")
    assert (issue.state, issue.comments, unmarked(issue.body)) == ("open", [], None)
    assert shape(writes_to(mesh.fake, issue)) == [("POST", f"/{issue.number}/labels")]


async def test_check_09_operator_bind_records_target_triple(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "09-operator")
    assert issue_titled(mesh.fake, "Bind me").labels == ["in-progress"]


async def test_check_10_new_incarnation_does_not_inherit_binding(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "10")
    issue = issue_titled(mesh.fake, "Outlives its seat")
    assert issue.assignees == ["octobot"]  # local.worker's account, whichever incarnation
    task_id = f"{REPO}#{issue.number}"

    def retitle(title: str) -> None:
        mesh.fake.set_title(issue, title, "octocat")

    await hosted.check_10_sync_keeps_binding(
        mesh, task_id, retitle, "Outlives its seat (retitled on GitHub)"
    )


async def test_check_11_environment_three_outcomes(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "11")
    # Each claim and bind labelled its issue; no environment reached GitHub.
    for issue in mesh.fake.repos[REPO].issues.values():
        assert issue.labels == ["in-progress"]
        assert "k8s://" not in json.dumps([c.body for c in issue.comments])


async def test_check_12_list_limit_is_capped_at_ceiling(
    tmp_path: Path, fake: FakeGitHub, github_url: str
) -> None:
    async with github_mesh(
        tmp_path, fake, github_url, page_ceiling=SMALL_PAGE_CEILING, seats=SEATS
    ) as small:
        await section6.passes(small, "12")
        assert len(fake.repos[REPO].issues) == SMALL_PAGE_CEILING + 1


async def test_check_13_records_carry_no_secret(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "13")
    # Refused before GitHub: the only issue created is the harmless one.
    assert [i.title for i in mesh.fake.repos[REPO].issues.values()] == [
        "Rotate the staging certificates"
    ]
    # And what GitHub holds is filtered on the way in: credential-shaped text is left out.

    def leak(title: str, body: str) -> str:
        return f"{REPO}#{mesh.fake.add_issue(REPO, title, body)['number']}"

    await hosted.check_13_import_filters_secrets(mesh, leak)


async def test_check_14_create_with_pinned_id_creates_one_task(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "14")
    assert len(mesh.fake.calls("POST", ISSUES)) == 1
    assert [i.title for i in mesh.fake.repos[REPO].issues.values()] == ["Only once"]


async def test_check_15_create_refuses_bound_statuses(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "15")
    assert mesh.fake.writes == []


async def test_check_16_update_to_open_while_bound_is_bad_request(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "16")
    issue = issue_titled(mesh.fake, "Stay bound")
    assert (issue.state, issue.assignees, issue.labels) == ("open", ["octobot"], ["in-progress"])
    assert [r.method for r in writes_to(mesh.fake, issue)] == ["POST", "POST"]


async def test_check_17_administer_unbind_reopens_and_clears_binding(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "17")
    issue = issue_titled(mesh.fake, "Seat is gone")
    assert (issue.state, issue.assignees, issue.labels) == ("open", [], [])
    assert [unmarked(c.body) for c in issue.comments] == ["Seat is gone."]


# -- 9, the broker half, with a GitHub-backed bridge ---------------------------------------


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGitHub, github_url: str
) -> None:
    await hosted.check_09_broker_refuses_self_only_bind_and_admits_the_operator(
        tmp_path, monkeypatch, TRACKER, fake, github_url
    )


# -- 18 to 24: the positive path -----------------------------------------------------------


async def test_checks_18_to_24_and_what_github_shows(mesh: GitHubMesh) -> None:
    """Checks 18 to 24 are section 6's own functions, each asserting its step of one run
    of the positive path (run once here, where ``test_section6`` runs it per check),
    then the same run as GitHub sees it: one issue, labelled, commented, closed."""
    run = await hosted.checks_18_to_24(mesh)

    issue = issue_titled(mesh.fake, "Ship the parser")
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    assert (issue.assignees, issue.labels) == (["hubot"], [])  # local.w is hubot
    assert [unmarked(c.body) for c in issue.comments] == [
        f"Evidence:\n- run: {RUN_REF}",
        "Waiting on review.",
        f"Evidence:\n- commit: {COMMIT_REF}",
        "Merged.",
    ]
    statuses = [run.records[step]["statusSource"] for step in run.records]
    assert statuses == ["in-progress", "blocked", "blocked", "closed"]
    await hosted.echoes_change_nothing(mesh)


async def test_section6_sequence_on_ep_v1(mesh: GitHubMesh) -> None:
    await section6.passes(mesh, "ep-v1")


async def test_check_23_a_change_made_on_github_is_announced(mesh: GitHubMesh) -> None:

    def change() -> None:
        issue = issue_titled(mesh.fake, "Edited on GitHub")
        mesh.fake.close_issue(REPO, issue.number, "not_planned")

    record = await hosted.check_23_a_tracker_change_is_announced(mesh, "Edited on GitHub", change)
    assert record["status"] == "dropped"


# -- what GitHub cannot hold -------------------------------------------------------------


async def test_what_github_cannot_hold_is_lost_by_a_fresh_import(
    mesh: GitHubMesh, tmp_path: Path, github_url: str
) -> None:
    operator, worker, holder = mesh.caller("operator"), mesh.caller("worker"), mesh.caller("holder")
    await mesh.space.spawn(worker.seat, "k8s://cluster-a/ns/team-7")
    mapped = await create(operator, "Claimed by a seat with an account")
    unmapped = await create(operator, "Claimed by a seat without one")
    held = await claim(worker, mapped["taskId"])
    assert held["binding"]["environment"] == "k8s://cluster-a/ns/team-7"
    await claim(holder, unmapped["taskId"])
    await holder.ok(
        "update-task",
        {"taskId": unmapped["taskId"], "evidence": [{"kind": "run", "ref": RUN_REF}]},
        mode="self",
    )

    # A second mirror, imported from GitHub alone.
    presence = DictPresence()
    async with open_github(
        mesh.fake, github_url, tmp_path / "fresh", presence=presence, seats=SEATS
    ) as fresh:
        await fresh.poll()
        assert (await fresh.client.get(mapped["taskId"]))["status"] == "open"  # no uid known
        reborn = seat("worker", 9)
        presence.put(reborn, environment="k8s://cluster-a/ns/team-7")
        mesh.fake.advance(30)
        mesh.fake.touch(REPO, int(mapped["taskId"].rsplit("#", 1)[1]))
        mesh.fake.set_title(issue_titled(mesh.fake, held["title"]), held["title"] + ".", "x")
        await fresh.poll()
        again = await fresh.client.get(mapped["taskId"])
        other = await fresh.client.get(unmapped["taskId"])
    hosted.assert_fresh_import_lost(again, other, held, reborn, "in-progress")
