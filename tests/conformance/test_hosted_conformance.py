"""Section 6 of the tasks endpoint contract against a GitHub-, a GitLab-, a Jira- and a
Linear-backed endpoint, over the real wire: a nats-server, the real bridge serving a
``provider = "github"``, ``"gitlab"``, ``"jira"`` or ``"linear"`` endpoint whose store is a
mirror of the fake tracker (served on loopback, its sync loop running), and callers
speaking the wire. Each
check runs the conformance runner's own check (``section6.passes``, the one
``cotal-tasks conformance`` and the board suite run, so they cannot drift), then asserts
what the tracker itself was made to hold. Every test runs once per tracker
(``tests.support.trackers`` says what differs: Jira claims by assigning and taking the
transition into In Progress, so its claim mark is that status where the others' is a
label, and its positive path ends Done, resolution Done; Linear claims by delegating to the
seat's agent, or assigning its user account, and moving the issue to a started state).
Checks 18 to 24 assert their steps of one run of the positive path, run once.

The seat directories map some of the callers the checks use to tracker accounts
(GitHub: ``local.worker`` → ``octobot``, ``local.w`` → ``hubot``; GitLab: ``local.worker``
→ ``worker-bot``, ``local.w`` → ``w-bot``, ``local.holder`` → ``holder-bot``; Jira: the
same three seats to Atlassian accounts), so claims by those seats assign on the tracker
and the others only label (on Jira: only move the issue In Progress).

What holds, what differs, and why (nothing is skipped; where a check cannot hold as
written, a test asserts the documented alternative):

- Checks 1, 2, 4 to 9, 11, 12 and 14 to 24 hold as written. Check 2 and every read wait
  for the first sync: before it, reads carry ``stale`` (``staleAsOf: 0``), which is the
  honest answer (the endpoint does not know yet that the tracker holds nothing), not an
  empty board (``test_check_02_before_the_first_sync_the_empty_page_is_stale``).
- Check 3 ("store made unreadable") applies to the mirror, which is the store reads come
  from: spoiled, reads fail ``unavailable`` (holds). The tracker itself failing is not a
  store failure, because reads never call the tracker: they keep answering from the
  mirror and carry ``stale`` naming the failing sync, ``staleAsOf`` the last good one
  (``test_check_03_tracker_failing_reads_stale_not_empty``).
- Check 9's broker half never reaches a provider; it runs here on a permissioned broker
  with a hosted bridge started under exactly its ``--serve`` rows.
- Check 10 holds: the original ``lifecycleUid`` is kept, also across a sync of the issue
  while the tracker still shows the seat's account assigned.
- Check 14 holds: the envelope id is recorded in the mirror; the tracker gets one issue.
- What a tracker cannot hold: a binding's ``lifecycleUid``, ``boundBy``, ``boundAt`` and
  ``environment`` (it has assignee logins, and only for seats in the directory), and
  evidence written by ``update-task`` or ``create-task`` (posted as a comment or note,
  which the sync does not read back). These live in the mirror only, so checks 10, 11, 20
  and 21 hold through the mirror; a fresh mirror re-imported from the tracker cannot
  restore them (``test_what_the_tracker_cannot_hold_is_lost_by_a_fresh_import``).

Hosted task ids are the tracker's own references (``octo-org/hello-world#3``), minted by it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance.test_section6 as section6
from cotal_tasks.providers.hosted.http import TrackerHttpError
from tests.bridge._support import DictPresence
from tests.conformance import hosted
from tests.conformance.conftest import SMALL_PAGE_CEILING
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
from tests.providers.hosted_support import HostedMesh
from tests.support.polling import eventually
from tests.support.trackers import Side

Mesh = HostedMesh[Any]


@pytest.fixture
def side(tracker_side: Side) -> Side:
    return tracker_side


@pytest.fixture
def fake(tracker_fake: Any) -> Any:
    return tracker_fake


@pytest.fixture
def api_url(tracker_url: str) -> str:
    return tracker_url


@pytest.fixture
async def mesh(side: Side, tmp_path: Path, fake: Any, api_url: str) -> AsyncIterator[Mesh]:
    async with side.mesh(tmp_path, fake, api_url) as running:
        yield running


def claimed_once(side: Side, mesh: Mesh, title: str, actor: str) -> Any:
    """The issue titled ``title``, which took the writes of one claim by ``local.<actor>``
    and nothing more (a repeated claim, a refused update write nothing)."""
    issue = side.issue_titled(mesh.fake, title)
    assert side.shape(mesh.fake, issue) == side.claim_writes(side.number(issue), actor)
    return issue


# -- 1 to 17 -----------------------------------------------------------------------------


async def test_check_01_describe_lists_eight_commands(mesh: Mesh) -> None:
    await section6.passes(mesh, "01")


async def test_check_02_list_tasks_on_empty_board(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "02")
    (listing,) = side.listings(mesh.fake)  # the empty board: no issues
    assert listing.status == 200


async def test_check_02_before_the_first_sync_the_empty_page_is_stale(
    side: Side, tmp_path: Path, fake: Any, api_url: str
) -> None:
    side.refuse_next_listing(fake)  # the bridge's first poll is refused
    async with side.mesh(tmp_path, fake, api_url, wait_for_sync=False) as running:
        reader = running.caller("reader")

        async def refused() -> bool:
            return running.hosted.store.health.failing is not None

        await eventually(refused, within_s=10)
        page = await list_page(reader)
        assert page["tasks"] == []
        assert page["stale"]["staleAsOf"] == 0
        assert page["stale"]["reason"].startswith(f"{side.name} sync is failing: ")
        await running.poll()  # the tracker answers again
        await section6.passes(running, "02")


async def test_check_03_unreadable_store_is_unavailable(mesh: Mesh) -> None:
    await section6.passes(mesh, "03")


async def test_check_03_tracker_failing_reads_stale_not_empty(side: Side, mesh: Mesh) -> None:
    """The alternative for the tracker itself: reads come from the mirror, marked stale."""
    reader = mesh.caller("reader")
    task = await create(reader, f"Still here while {side.name} refuses us")
    assert "stale" not in await list_page(reader)
    last_success = mesh.hosted.store.health.last_success_ms
    mesh.fake.token = side.revoked_token  # our token is revoked
    with pytest.raises(TrackerHttpError, match="401"):
        await mesh.poll()
    for page in (
        await list_page(reader),
        await mesh.caller("worker").ok("my-tasks", {}, mode="self"),
    ):
        assert page["stale"]["reason"].startswith(f"{side.name} sync is failing: ")
        assert "401" in page["stale"]["reason"]
        assert page["stale"]["staleAsOf"] == last_success
    page = await list_page(reader)
    assert [t["taskId"] for t in page["tasks"]] == [task["taskId"]]
    assert await get(reader, task["taskId"]) == task


async def test_check_04_get_absent_task_is_not_found(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "04")
    reply = await mesh.caller("reader").call("get-task", {"taskId": side.ref(999)})
    assert refusal(reply)[0] == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: Mesh) -> None:
    await section6.passes(mesh, "05")


async def test_check_06_claim_binds_caller_and_repeats_same_record(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "06")
    issue = claimed_once(side, mesh, "Claim me", "worker")
    assert (side.assignees(issue), side.marks(issue)) == (side.accounts("worker"), [side.claimed])


async def test_check_07_claim_of_foreign_task_is_conflict(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "07")
    issue = claimed_once(side, mesh, "Contested", "holder")
    assert side.assignees(issue) == side.accounts("holder")


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(
    side: Side, mesh: Mesh
) -> None:
    await section6.passes(mesh, "08")
    issue = claimed_once(side, mesh, "Not yours", "holder")
    assert (side.state(issue), side.notes(issue), side.body(issue)) == (side.open_state, [], None)


async def test_check_09_operator_bind_records_target_triple(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "09-operator")
    issue = side.issue_titled(mesh.fake, "Bind me")
    assert (side.assignees(issue), side.marks(issue)) == (side.accounts("worker"), [side.claimed])


async def test_check_10_new_incarnation_does_not_inherit_binding(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "10")
    issue = side.issue_titled(mesh.fake, "Outlives its seat")
    assert side.assignees(issue) == side.accounts("worker")  # whichever incarnation

    def retitle(title: str) -> None:
        side.retitle(mesh.fake, issue, title)

    await hosted.check_10_sync_keeps_binding(
        mesh, side.task_id(issue), retitle, f"Outlives its seat (retitled on {side.name})"
    )


async def test_check_11_environment_three_outcomes(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "11")
    # Each claim and bind labelled its issue; no environment reached the tracker.
    sent = json.dumps([r.body for r in mesh.fake.writes])
    for issue in side.issues(mesh.fake):
        assert side.marks(issue) == [side.claimed]
        assert "k8s://" not in json.dumps(side.notes(issue))
    assert "k8s://" not in sent
    assert "user:pass" not in sent


async def test_check_12_list_limit_is_capped_at_ceiling(
    side: Side, tmp_path: Path, fake: Any, api_url: str
) -> None:
    async with side.mesh(tmp_path, fake, api_url, page_ceiling=SMALL_PAGE_CEILING) as small:
        await section6.passes(small, "12")
        assert len(side.issues(fake)) == SMALL_PAGE_CEILING + 1


async def test_check_13_records_carry_no_secret(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "13")
    # Refused before the tracker: the only issue created is the harmless one.
    assert side.titles(mesh.fake) == ["Rotate the staging certificates"]
    sent = json.dumps([r.body for r in mesh.fake.writes])
    for secret in (*section6.SECRETS.values(), "token=abc123"):
        assert secret not in sent
    # And what the tracker holds is filtered on the way in: credential-shaped text is left out.

    def leak(title: str, body: str) -> str:
        return side.ref(side.add_issue(mesh.fake, title, body))

    await hosted.check_13_import_filters_secrets(mesh, leak)


async def test_check_14_create_with_pinned_id_creates_one_task(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "14")
    assert len(mesh.fake.calls("POST", side.create_path)) == 1
    assert side.titles(mesh.fake) == ["Only once"]


async def test_check_15_create_refuses_bound_statuses(mesh: Mesh) -> None:
    await section6.passes(mesh, "15")
    assert mesh.fake.writes == []


async def test_check_16_update_to_open_while_bound_is_bad_request(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "16")
    issue = claimed_once(side, mesh, "Stay bound", "worker")
    assert (side.state(issue), side.assignees(issue), side.marks(issue)) == (
        side.open_state,
        side.accounts("worker"),
        [side.claimed],
    )


async def test_check_17_administer_unbind_reopens_and_clears_binding(
    side: Side, mesh: Mesh
) -> None:
    await section6.passes(mesh, "17")
    issue = side.issue_titled(mesh.fake, "Seat is gone")
    held = (side.state(issue), side.assignees(issue), side.marks(issue))
    assert held == (side.open_state, [], [])
    assert side.notes(issue) == ["Seat is gone."]


# -- 9, the broker half, with a hosted bridge ----------------------------------------------


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    side: Side, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Any, api_url: str
) -> None:
    await hosted.check_09_broker_refuses_self_only_bind_and_admits_the_operator(
        tmp_path, monkeypatch, side.tracker, fake, api_url
    )


# -- 18 to 24: the positive path -----------------------------------------------------------


async def test_checks_18_to_24_and_what_the_tracker_shows(side: Side, mesh: Mesh) -> None:
    """Checks 18 to 24 are section 6's own functions, each asserting its step of one run
    of the positive path (run once here, where ``test_section6`` runs it per check),
    then the same run as the tracker sees it: one issue, assigned, commented, closed."""
    run = await hosted.checks_18_to_24(mesh)

    issue = side.issue_titled(mesh.fake, "Ship the parser")
    assert side.closed_as_done(mesh.fake, issue)
    assert (side.assignees(issue), side.marks(issue)) == (side.accounts("w"), [])
    assert side.notes(issue) == [
        f"Evidence:\n- run: {RUN_REF}",
        "Waiting on review.",
        f"Evidence:\n- commit: {COMMIT_REF}",
        "Merged.",
    ]
    statuses = [run.records[step]["statusSource"] for step in run.records]
    assert statuses == [side.claimed, side.blocked, side.blocked, side.closed_source]
    await hosted.echoes_change_nothing(mesh)


async def test_section6_sequence_on_ep_v1(side: Side, mesh: Mesh) -> None:
    await section6.passes(mesh, "ep-v1")
    assert side.titles(mesh.fake) == ["On the versioned rail"]


async def test_check_23_a_change_made_on_the_tracker_is_announced(side: Side, mesh: Mesh) -> None:
    title = f"Edited on {side.name}"
    source: list[str] = []

    def change() -> None:
        source.append(side.drop(mesh.fake, side.issue_titled(mesh.fake, title)))

    record = await hosted.check_23_a_tracker_change_is_announced(mesh, title, change)
    assert (record["status"], record["statusSource"]) == ("dropped", source[0])


# -- what the tracker cannot hold -------------------------------------------------------


async def test_what_the_tracker_cannot_hold_is_lost_by_a_fresh_import(
    side: Side, mesh: Mesh, tmp_path: Path, api_url: str
) -> None:
    unmapped_actor = "reader"  # no account on either tracker
    operator, worker = mesh.caller("operator"), mesh.caller("worker")
    holder = mesh.caller(unmapped_actor)
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

    # A second mirror, imported from the tracker alone.
    presence = DictPresence()
    async with side.open_fresh(mesh.fake, api_url, tmp_path / "fresh", presence) as fresh:
        await fresh.poll()
        assert (await fresh.client.get(mapped["taskId"]))["status"] == "open"  # no uid known
        reborn = seat("worker", 9)
        presence.put(reborn, environment="k8s://cluster-a/ns/team-7")
        mesh.fake.advance(30)
        side.touch(mesh.fake, side.number_in(mapped["taskId"]))
        side.retitle(mesh.fake, side.issue_titled(mesh.fake, held["title"]), held["title"] + ".")
        await fresh.poll()
        again = await fresh.client.get(mapped["taskId"])
        other = await fresh.client.get(unmapped["taskId"])
    hosted.assert_fresh_import_lost(again, other, held, reborn, side.claimed)
