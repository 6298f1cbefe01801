"""Section 6 of the tasks endpoint contract against a GitLab-backed endpoint, over the
real wire: a nats-server, the real bridge serving a ``provider = "gitlab"`` endpoint whose
store is a mirror of the fake GitLab (served on loopback, its sync loop running), and
callers speaking the wire. Each check runs the conformance runner's own check
(``section6.passes``, the one ``cotal-tasks conformance`` and the board suite run, so they
cannot drift), then asserts what GitLab itself was made to hold. Checks 18 to 24 assert
their steps of one run of the positive path, run once.

The seat directory maps three of the callers the checks use to GitLab accounts
(``local.worker`` → ``worker-bot``, ``local.w`` → ``w-bot``, ``local.holder`` →
``holder-bot``), so claims by those seats assign on GitLab and the others only label.

What holds, what differs, and why — the same exceptions as the GitHub-backed endpoint
(``test_github_conformance.py``); nothing is skipped, and where a check cannot hold as
written, a test asserts the documented alternative:

- Checks 1, 2, 4 to 9, 11, 12 and 14 to 24 hold as written. Check 2 and every read wait
  for the first sync: before it, reads carry ``stale`` (``staleAsOf: 0``), which is the
  honest answer (the endpoint does not know yet that GitLab holds nothing), not an empty
  board (``test_check_02_before_the_first_sync_the_empty_page_is_stale``).
- Check 3 ("store made unreadable") applies to the mirror, which is the store reads come
  from: spoiled, reads fail ``unavailable`` (holds). GitLab itself failing is not a store
  failure, because reads never call the tracker: they keep answering from the mirror and
  carry ``stale`` naming the failing sync, ``staleAsOf`` the last good one
  (``test_check_03_gitlab_failing_reads_stale_not_empty``).
- Check 9's broker half never reaches a provider; it runs here on a permissioned broker
  with a GitLab-backed bridge started under exactly its ``--serve`` rows.
- Check 10 holds: the original ``lifecycleUid`` is kept, also across a sync of the issue
  while GitLab still shows the seat's account assigned.
- Check 14 holds: the envelope id is recorded in the mirror; GitLab gets one issue.
- What GitLab cannot hold: a binding's ``lifecycleUid``, ``boundBy``, ``boundAt`` and
  ``environment`` (GitLab has assignee usernames, and only for seats in the directory), and
  evidence written by ``update-task`` or ``create-task`` (posted as a note, which the sync
  does not read back; GitLab's own evidence comes from merge requests). These live in the
  mirror only, so checks 10, 11, 20 and 21 hold through the mirror; a fresh mirror
  re-imported from GitLab cannot restore them
  (``test_what_gitlab_cannot_hold_is_lost_by_a_fresh_import``).

Hosted task ids are GitLab's own references (``acme/widgets#3``), minted by the tracker.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance.test_section6 as section6
from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.providers.hosted.http import TrackerHttpError
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
from tests.providers.gitlab._support import (
    CLAIMED,
    ISSUES,
    PROJECT,
    TOKEN_ENV,
    GitLabMesh,
    gitlab_config,
    gitlab_mesh,
    open_gitlab,
)
from tests.providers.hosted_support import eventually
from tests.support.bridge import ENDPOINT
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, serve_fake_gitlab
from tests.support.fake_gitlab_model import Issue
from tests.support.fake_tracker import unmarked

Json = dict[str, Any]
SEATS = {"worker-bot": "local.worker", "w-bot": "local.w", "holder-bot": "local.holder"}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGitLab:
    gitlab = FakeGitLab(projects=(PROJECT,))
    for username in SEATS:
        gitlab.add_user(username)
    monkeypatch.setenv(TOKEN_ENV, gitlab.token)
    return gitlab


@pytest.fixture
async def gitlab_url(fake: FakeGitLab) -> AsyncIterator[str]:
    async with serve_fake_gitlab(fake) as url:
        yield url


@pytest.fixture
async def mesh(tmp_path: Path, fake: FakeGitLab, gitlab_url: str) -> AsyncIterator[GitLabMesh]:
    async with gitlab_mesh(tmp_path, fake, gitlab_url, seats=SEATS) as running:
        yield running


def issue_titled(fake: FakeGitLab, title: str) -> Issue:
    (issue,) = [i for i in fake.project(PROJECT).issues.values() if i.title == title]
    return issue


def writes_to(fake: FakeGitLab, issue: Issue) -> list[RecordedRequest]:
    """Writes to one issue after its creation (its PUTs and notes)."""
    base = f"{ISSUES}/{issue.iid}"
    return [r for r in fake.writes if r.path == base or r.path.startswith(base + "/")]


def shape(requests: list[RecordedRequest]) -> list[tuple[str, str]]:
    return [(r.method, r.path.removeprefix(ISSUES)) for r in requests]


def user_notes(issue: Issue) -> list[str]:
    return [unmarked(n.body) for n in issue.notes if not n.system]


def labels_titled(fake: FakeGitLab, title: str) -> list[str]:
    return issue_titled(fake, title).labels


TRACKER = Tracker(
    provider="gitlab",
    section=lambda api_url: (
        f'provider = "gitlab"\n[endpoints.gitlab]\nproject = "{PROJECT}"\n'
        f'api_url = "{api_url}"\ntoken_env = "{TOKEN_ENV}"\n'
    ),
    endpoint=lambda api_url: EndpointConfig(name=ENDPOINT, settings=gitlab_config(api_url)),
    labels_of=labels_titled,
    claimed=CLAIMED,
)


# -- 1 to 17 -----------------------------------------------------------------------------


async def test_check_01_describe_lists_eight_commands(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "01")


async def test_check_02_list_tasks_on_empty_board(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "02")
    (listing,) = mesh.fake.calls("GET", ISSUES)  # the empty board is an empty project
    assert listing.status == 200


async def test_check_02_before_the_first_sync_the_empty_page_is_stale(
    tmp_path: Path, fake: FakeGitLab, gitlab_url: str
) -> None:
    fake.fail_next(status=403, path=ISSUES)  # the bridge's first poll is refused
    async with gitlab_mesh(tmp_path, fake, gitlab_url, wait_for_sync=False) as running:
        reader = running.caller("reader")

        async def refused() -> bool:
            return running.hosted.store.health.failing is not None

        await eventually(refused, within_s=10)
        page = await list_page(reader)
        assert page["tasks"] == []
        assert page["stale"]["staleAsOf"] == 0
        assert page["stale"]["reason"].startswith("GitLab sync is failing: ")
        await running.poll()  # GitLab answers again
        await section6.passes(running, "02")


async def test_check_03_unreadable_store_is_unavailable(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "03")


async def test_check_03_gitlab_failing_reads_stale_not_empty(mesh: GitLabMesh) -> None:
    """The alternative for the tracker itself: reads come from the mirror, marked stale."""
    reader = mesh.caller("reader")
    task = await create(reader, "Still here while GitLab refuses us")
    assert "stale" not in await list_page(reader)
    last_success = mesh.hosted.store.health.last_success_ms
    mesh.fake.token = "glpat-rotated00000000000"  # our token is revoked
    with pytest.raises(TrackerHttpError, match="401"):
        await mesh.poll()
    for page in (
        await list_page(reader),
        await mesh.caller("worker").ok("my-tasks", {}, mode="self"),
    ):
        assert page["stale"]["reason"].startswith("GitLab sync is failing: ")
        assert "401" in page["stale"]["reason"]
        assert page["stale"]["staleAsOf"] == last_success
    page = await list_page(reader)
    assert [t["taskId"] for t in page["tasks"]] == [task["taskId"]]
    assert await get(reader, task["taskId"]) == task


async def test_check_04_get_absent_task_is_not_found(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "04")
    reply = await mesh.caller("reader").call("get-task", {"taskId": f"{PROJECT}#999"})
    assert refusal(reply)[0] == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "05")


async def test_check_06_claim_binds_caller_and_repeats_same_record(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "06")
    issue = issue_titled(mesh.fake, "Claim me")
    assert (issue.assignees, issue.labels) == (["worker-bot"], [CLAIMED])
    # One PUT (GitLab replaces the assignee list and adds the label at once); the
    # repeated claim wrote nothing.
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_07_claim_of_foreign_task_is_conflict(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "07")
    issue = issue_titled(mesh.fake, "Contested")
    assert issue.assignees == ["holder-bot"]
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(
    mesh: GitLabMesh,
) -> None:
    await section6.passes(mesh, "08")
    issue = issue_titled(mesh.fake, "Not yours")
    assert (issue.state, user_notes(issue), unmarked(issue.description)) == ("opened", [], None)
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_09_operator_bind_records_target_triple(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "09-operator")
    issue = issue_titled(mesh.fake, "Bind me")
    assert (issue.assignees, issue.labels) == (["worker-bot"], [CLAIMED])


async def test_check_10_new_incarnation_does_not_inherit_binding(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "10")
    issue = issue_titled(mesh.fake, "Outlives its seat")
    assert issue.assignees == ["worker-bot"]  # local.worker's account, whichever incarnation
    task_id = f"{PROJECT}#{issue.iid}"

    def retitle(title: str) -> None:
        issue.title, issue.updated_ms = title, mesh.fake.clock.ms

    await hosted.check_10_sync_keeps_binding(
        mesh, task_id, retitle, "Outlives its seat (retitled on GitLab)"
    )


async def test_check_11_environment_three_outcomes(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "11")
    # Each claim and bind labelled its issue; no environment reached GitLab.
    sent = json.dumps([r.body for r in mesh.fake.writes])
    for issue in mesh.fake.project(PROJECT).issues.values():
        assert issue.labels == [CLAIMED]
    assert "k8s://" not in sent
    assert "user:pass" not in sent


async def test_check_12_list_limit_is_capped_at_ceiling(
    tmp_path: Path, fake: FakeGitLab, gitlab_url: str
) -> None:
    async with gitlab_mesh(
        tmp_path, fake, gitlab_url, page_ceiling=SMALL_PAGE_CEILING, seats=SEATS
    ) as small:
        await section6.passes(small, "12")
        assert len(fake.project(PROJECT).issues) == SMALL_PAGE_CEILING + 1


async def test_check_13_records_carry_no_secret(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "13")
    # Refused before GitLab: the only issue created is the harmless one.
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == [
        "Rotate the staging certificates"
    ]
    sent = json.dumps([r.body for r in mesh.fake.writes])
    for secret in (*section6.SECRETS.values(), "token=abc123"):
        assert secret not in sent
    # And what GitLab holds is filtered on the way in: credential-shaped text is left out.

    def leak(title: str, body: str) -> str:
        return f"{PROJECT}#{mesh.fake.add_issue(PROJECT, title, body)['iid']}"

    await hosted.check_13_import_filters_secrets(mesh, leak)


async def test_check_14_create_with_pinned_id_creates_one_task(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "14")
    assert len(mesh.fake.calls("POST", ISSUES)) == 1
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == ["Only once"]


async def test_check_15_create_refuses_bound_statuses(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "15")
    assert mesh.fake.writes == []


async def test_check_16_update_to_open_while_bound_is_bad_request(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "16")
    issue = issue_titled(mesh.fake, "Stay bound")
    assert (issue.state, issue.assignees, issue.labels) == ("opened", ["worker-bot"], [CLAIMED])
    assert [r.method for r in writes_to(mesh.fake, issue)] == ["PUT"]


async def test_check_17_administer_unbind_reopens_and_clears_binding(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "17")
    issue = issue_titled(mesh.fake, "Seat is gone")
    assert (issue.state, issue.assignees, issue.labels) == ("opened", [], [])
    assert user_notes(issue) == ["Seat is gone."]


# -- 9, the broker half, with a GitLab-backed bridge ---------------------------------------


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGitLab, gitlab_url: str
) -> None:
    await hosted.check_09_broker_refuses_self_only_bind_and_admits_the_operator(
        tmp_path, monkeypatch, TRACKER, fake, gitlab_url
    )


# -- 18 to 24: the positive path -----------------------------------------------------------


async def test_checks_18_to_24_and_what_gitlab_shows(mesh: GitLabMesh) -> None:
    """Checks 18 to 24 are section 6's own functions, each asserting its step of one run
    of the positive path (run once here, where ``test_section6`` runs it per check),
    then the same run as GitLab sees it: one issue, assigned, noted, closed."""
    run = await hosted.checks_18_to_24(mesh)

    issue = issue_titled(mesh.fake, "Ship the parser")
    assert (issue.state, issue.closed_by) == ("closed", mesh.fake.username)
    assert (issue.assignees, issue.labels) == (["w-bot"], [])  # local.w is w-bot
    assert user_notes(issue) == [
        f"Evidence:\n- run: {RUN_REF}",
        "Waiting on review.",
        f"Evidence:\n- commit: {COMMIT_REF}",
        "Merged.",
    ]
    statuses = [run.records[step]["statusSource"] for step in run.records]
    assert statuses == [CLAIMED, "workflow::blocked", "workflow::blocked", "closed"]
    await hosted.echoes_change_nothing(mesh)


async def test_section6_sequence_on_ep_v1(mesh: GitLabMesh) -> None:
    await section6.passes(mesh, "ep-v1")
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == [
        "On the versioned rail"
    ]


async def test_check_23_a_change_made_on_gitlab_is_announced(mesh: GitLabMesh) -> None:

    def change() -> None:
        issue = issue_titled(mesh.fake, "Edited on GitLab")
        mesh.fake.set_labels(issue, ["workflow::won't do"])
        mesh.fake.close_issue(PROJECT, issue.iid)

    record = await hosted.check_23_a_tracker_change_is_announced(mesh, "Edited on GitLab", change)
    assert (record["status"], record["statusSource"]) == ("dropped", "workflow::won't do")


# -- what GitLab cannot hold -------------------------------------------------------------


async def test_what_gitlab_cannot_hold_is_lost_by_a_fresh_import(
    mesh: GitLabMesh, tmp_path: Path, gitlab_url: str
) -> None:
    operator, worker, holder = mesh.caller("operator"), mesh.caller("worker"), mesh.caller("reader")
    await mesh.space.spawn(worker.seat, "k8s://cluster-a/ns/team-7")
    mapped = await create(operator, "Claimed by a seat with an account")
    unmapped = await create(operator, "Claimed by a seat without one")
    held = await claim(worker, mapped["taskId"])
    assert held["binding"]["environment"] == "k8s://cluster-a/ns/team-7"
    await claim(holder, unmapped["taskId"])  # local.reader has no GitLab account
    await holder.ok(
        "update-task",
        {"taskId": unmapped["taskId"], "evidence": [{"kind": "run", "ref": RUN_REF}]},
        mode="self",
    )

    # A second mirror, imported from GitLab alone.
    presence = DictPresence()
    async with open_gitlab(
        mesh.fake, gitlab_url, tmp_path / "fresh", presence=presence, seats=SEATS
    ) as fresh:
        await fresh.poll()
        assert (await fresh.client.get(mapped["taskId"]))["status"] == "open"  # no uid known
        reborn = seat("worker", 9)
        presence.put(reborn, environment="k8s://cluster-a/ns/team-7")
        mesh.fake.advance(30)
        mesh.fake.touch(PROJECT, int(mapped["taskId"].rsplit("#", 1)[1]))
        await fresh.poll()
        again = await fresh.client.get(mapped["taskId"])
        other = await fresh.client.get(unmapped["taskId"])
    hosted.assert_fresh_import_lost(again, other, held, reborn, CLAIMED)
