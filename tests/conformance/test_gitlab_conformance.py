"""Section 6 of the tasks endpoint contract against a GitLab-backed endpoint, over the
real wire: a nats-server, the real bridge serving a ``provider = "gitlab"`` endpoint whose
store is a mirror of the fake GitLab (served on loopback, its sync loop running), and
callers speaking the wire. Each check runs the very function ``test_section6.py`` runs
against the board (so the suites cannot drift), then asserts what GitLab itself was made
to hold. Checks 18 to 24 assert their steps of one run of the positive path, run once.

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

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg

import tests.conformance.test_section6 as section6
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.runtime import running_bridge
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.providers.hosted.http import TrackerHttpError
from tests.bridge._support import DictPresence
from tests.conformance.conftest import SMALL_PAGE_CEILING, Mesh
from tests.conformance.test_section6 import (
    BRIDGE_PASSWORD_ENV,
    COMMIT_REF,
    RUN_REF,
    Errors,
    PositiveRun,
    _connected,
    _grants,
    _violations,
    binding_triple,
    board_events,
    claim,
    create,
    get,
    list_page,
    my_ids,
    refusal,
    triple,
)
from tests.conftest import seat
from tests.providers.gitlab._support import (
    CLAIMED,
    ISSUES,
    PROJECT,
    TOKEN_ENV,
    GitLabMesh,
    eventually,
    first_sync,
    gitlab_config,
    gitlab_mesh,
    open_gitlab,
)
from tests.support.bridge import ENDPOINT, SPACE, TEST_HTTP, broker, set_up_space
from tests.support.cotal import Space, TestCaller, collect, nonce
from tests.support.fake_gitlab import FakeGitLab, RecordedRequest, serve_fake_gitlab
from tests.support.fake_gitlab_model import Issue

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
    return [n.body for n in issue.notes if not n.system]


# -- 1 to 17 -----------------------------------------------------------------------------


async def test_check_01_describe_lists_eight_commands(mesh: GitLabMesh) -> None:
    await section6.test_check_01_describe_lists_eight_commands(mesh)


async def test_check_02_list_tasks_on_empty_board(mesh: GitLabMesh) -> None:
    await section6.test_check_02_list_tasks_on_empty_board(mesh)
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
        await section6.test_check_02_list_tasks_on_empty_board(running)


async def test_check_03_unreadable_store_is_unavailable(mesh: GitLabMesh) -> None:
    await section6.test_check_03_unreadable_store_is_unavailable(mesh)


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
    await section6.test_check_04_get_absent_task_is_not_found(mesh)
    reply = await mesh.caller("reader").call("get-task", {"taskId": f"{PROJECT}#999"})
    assert refusal(reply)[0] == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: GitLabMesh) -> None:
    await section6.test_check_05_my_tasks_self_and_untargeted(mesh)


async def test_check_06_claim_binds_caller_and_repeats_same_record(mesh: GitLabMesh) -> None:
    await section6.test_check_06_claim_binds_caller_and_repeats_same_record(mesh)
    issue = issue_titled(mesh.fake, "Claim me")
    assert (issue.assignees, issue.labels) == (["worker-bot"], [CLAIMED])
    # One PUT (GitLab replaces the assignee list and adds the label at once); the
    # repeated claim wrote nothing.
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_07_claim_of_foreign_task_is_conflict(mesh: GitLabMesh) -> None:
    await section6.test_check_07_claim_of_foreign_task_is_conflict(mesh)
    issue = issue_titled(mesh.fake, "Contested")
    assert issue.assignees == ["holder-bot"]
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(
    mesh: GitLabMesh,
) -> None:
    await section6.test_check_08_update_of_foreign_task_is_denied_and_unchanged(mesh)
    issue = issue_titled(mesh.fake, "Not yours")
    assert (issue.state, user_notes(issue), issue.description) == ("opened", [], None)
    assert shape(writes_to(mesh.fake, issue)) == [("PUT", f"/{issue.iid}")]


async def test_check_09_operator_bind_records_target_triple(mesh: GitLabMesh) -> None:
    await section6.test_check_09_operator_bind_records_target_triple(mesh)
    issue = issue_titled(mesh.fake, "Bind me")
    assert (issue.assignees, issue.labels) == (["worker-bot"], [CLAIMED])


async def test_check_10_new_incarnation_does_not_inherit_binding(mesh: GitLabMesh) -> None:
    await section6.test_check_10_new_incarnation_does_not_inherit_binding(mesh)
    operator, old, new = mesh.caller("operator"), mesh.caller("worker", 1), mesh.caller("worker", 2)
    issue = issue_titled(mesh.fake, "Outlives its seat")
    assert issue.assignees == ["worker-bot"]  # local.worker's account, whichever incarnation
    task_id = f"{PROJECT}#{issue.iid}"
    held = await get(operator, task_id)
    # GitLab changes the issue and the sync reads it while the new incarnation is present.
    mesh.fake.advance(30)
    issue.title, issue.updated_ms = "Outlives its seat (retitled on GitLab)", mesh.fake.clock.ms
    assert (await mesh.poll()).changed == 1
    record = await get(operator, task_id)
    assert record["title"] == "Outlives its seat (retitled on GitLab)"
    assert record["binding"] == held["binding"]
    assert binding_triple(record) == triple(old)
    assert task_id not in await my_ids(new)


async def test_check_11_environment_three_outcomes(mesh: GitLabMesh) -> None:
    await section6.test_check_11_environment_three_outcomes(mesh)
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
        await section6.test_check_12_list_limit_is_capped_at_ceiling(small)
        assert len(fake.project(PROJECT).issues) == SMALL_PAGE_CEILING + 2


async def test_check_13_records_carry_no_secret(mesh: GitLabMesh) -> None:
    await section6.test_check_13_records_carry_no_secret(mesh)
    # Refused before GitLab: the only issue created is the harmless one.
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == [
        "Rotate the staging certificates"
    ]
    sent = json.dumps([r.body for r in mesh.fake.writes])
    for secret in (*section6.SECRETS.values(), "token=abc123"):
        assert secret not in sent
    # And what GitLab holds is filtered on the way in: credential-shaped text is left out.
    fake = mesh.fake
    fake.advance(30)
    leaked = fake.add_issue(PROJECT, section6.SECRETS["title"], section6.SECRETS["brief"])
    await mesh.poll()
    record = await get(mesh.caller("reader"), f"{PROJECT}#{leaked['iid']}")
    section6._only_record_fields(record)
    text = json.dumps(record, ensure_ascii=False)
    for secret in section6.SECRETS.values():
        assert secret not in text
    assert "brief" not in record


async def test_check_14_create_with_pinned_id_creates_one_task(mesh: GitLabMesh) -> None:
    await section6.test_check_14_create_with_pinned_id_creates_one_task(mesh)
    assert len(mesh.fake.calls("POST", ISSUES)) == 1
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == ["Only once"]


async def test_check_15_create_refuses_bound_statuses(mesh: GitLabMesh) -> None:
    await section6.test_check_15_create_refuses_bound_statuses(mesh)
    assert mesh.fake.writes == []


async def test_check_16_update_to_open_while_bound_is_bad_request(mesh: GitLabMesh) -> None:
    await section6.test_check_16_update_to_open_while_bound_is_bad_request(mesh)
    issue = issue_titled(mesh.fake, "Stay bound")
    assert (issue.state, issue.assignees, issue.labels) == ("opened", ["worker-bot"], [CLAIMED])
    assert [r.method for r in writes_to(mesh.fake, issue)] == ["PUT"]


async def test_check_17_administer_unbind_reopens_and_clears_binding(mesh: GitLabMesh) -> None:
    await section6.test_check_17_administer_unbind_reopens_and_clears_binding(mesh)
    issue = issue_titled(mesh.fake, "Seat is gone")
    assert (issue.state, issue.assignees, issue.labels) == ("opened", [], [])
    assert user_notes(issue) == ["Seat is gone."]


# -- 9, the broker half, with a GitLab-backed bridge ---------------------------------------


@dataclass
class Permissioned:
    log: Path
    seat: TestCaller  # holds tasks.self only
    operator: TestCaller  # holds tasks.read, tasks.write, tasks.bind, tasks.self
    seat_errors: Errors
    routed: list[str]

    def bridge_denials(self) -> list[str]:
        return _violations(self.log, "cotal-tasks")


@asynccontextmanager
async def permissioned_gitlab_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_url: str
) -> AsyncIterator[Permissioned]:
    """As ``section6.permissioned_mesh``, with the endpoint served from GitLab."""
    seat_seat, operator_seat = seat("seat", 3), seat("operator", 4)
    data_dir = tmp_path / "bridge"
    next_incarnation(data_dir, ENDPOINT.replace(".", "_"))
    toml = tmp_path / "tasks.toml"
    toml.write_text(
        f'space = "{SPACE}"\nnats_url = "nats://127.0.0.1:4222"\ndata_dir = "{data_dir}"\n'
        f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "gitlab"\n'
        f'[endpoints.gitlab]\nproject = "{PROJECT}"\napi_url = "{api_url}"\n'
        f'token_env = "{TOKEN_ENV}"\n',
        encoding="utf-8",
    )
    serve, seat_rows, operator_rows = await asyncio.gather(
        _grants(toml, "--serve"),
        _grants(toml, "--capability", "tasks.self", "--as", str(seat_seat)),
        _grants(
            toml,
            *("--capability", "tasks.read", "--capability", "tasks.write"),
            *("--capability", "tasks.bind", "--capability", "tasks.self"),
            *("--as", str(operator_seat)),
        ),
    )
    passwords = {name: secrets.token_hex(12) for name in ("admin", "bridge", "seat", "operator")}
    users = [
        {"user": "admin", "password": passwords["admin"]},
        {"user": "bridge", "password": passwords["bridge"], "permissions": serve},
        {"user": "seat", "password": passwords["seat"], "permissions": seat_rows},
        {"user": "operator", "password": passwords["operator"], "permissions": operator_rows},
    ]
    server_conf = tmp_path / "nats.conf"
    server_conf.write_text(
        "authorization: " + json.dumps({"users": users}, indent=2) + "\n", encoding="utf-8"
    )
    monkeypatch.setenv(BRIDGE_PASSWORD_ENV, passwords["bridge"])
    async with broker(tmp_path, config_file=server_conf) as server:
        log = server.store_dir / "nats-server.log"
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = BridgeConfig(
            space=SPACE,
            http=TEST_HTTP,
            data_dir=data_dir,
            nats_url=server.url,
            nats_user="bridge",
            nats_password_env=BRIDGE_PASSWORD_ENV,
            endpoints=(
                EndpointConfig(name=ENDPOINT, provider="gitlab", gitlab=gitlab_config(api_url)),
            ),
        )
        async with running_bridge(config) as bridge:
            await first_sync(bridge)
            seat_errors, operator_errors = Errors(), Errors()
            async with (
                _connected(server.url, "admin", passwords["admin"], Errors()) as admin_nc,
                _connected(server.url, "seat", passwords["seat"], seat_errors) as seat_nc,
                _connected(server.url, "operator", passwords["operator"], operator_errors) as op,
            ):
                await Space(admin_nc.jetstream(), SPACE).spawn(seat_seat)
                routed: list[str] = []

                async def route_spy(msg: Msg) -> None:
                    routed.append(msg.subject)

                await admin_nc.subscribe(f"{section6.PREFIX}.ep.>", cb=route_spy)
                await admin_nc.flush()
                yield Permissioned(
                    log,
                    TestCaller(seat_nc, SPACE, ENDPOINT, seat_seat),
                    TestCaller(op, SPACE, ENDPOINT, operator_seat),
                    seat_errors,
                    routed,
                )
                assert operator_errors.seen == []


async def test_check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGitLab, gitlab_url: str
) -> None:
    async with permissioned_gitlab_mesh(tmp_path, monkeypatch, gitlab_url) as mesh:
        target = mesh.seat.seat
        task = await create(mesh.operator, "Only an operator binds this")
        request_nonce = nonce()
        subject = mesh.seat.subject(
            "bind-task", request_nonce, mode="owner", target_owner=target.owner
        )
        body = mesh.seat.envelope("bind-task", args={"taskId": task["taskId"]}, target=target)
        got = await mesh.seat.exchange(subject, json.dumps(body).encode(), request_nonce, wait=1)
        assert got is None, f"a reply came for a publish the broker should deny: {got}"
        assert mesh.seat_errors.denied_publish(subject), mesh.seat_errors.seen
        assert subject not in mesh.routed
        issue = issue_titled(fake, "Only an operator binds this")
        assert issue.labels == []  # nothing reached GitLab either

        bound = await mesh.operator.ok(
            "bind-task", {"taskId": task["taskId"]}, mode="owner", target=target
        )
        assert bound["status"] == "claimed"
        assert binding_triple(bound) == {
            "owner": target.owner,
            "actor": target.actor,
            "lifecycleUid": target.lifecycleUid,
        }
        assert issue.labels == [CLAIMED]
        assert await my_ids(mesh.seat) == [task["taskId"]]
        assert mesh.bridge_denials() == []


# -- 18 to 24: the positive path -----------------------------------------------------------


async def test_checks_18_to_24_and_what_gitlab_shows(
    mesh: GitLabMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checks 18 to 24 are section 6's own functions, each asserting its step of one run
    of the positive path (run once here, where ``test_section6`` runs it per check),
    then the same run as GitLab sees it: one issue, assigned, noted, closed."""
    run = await section6.positive_path(mesh)

    async def the_run(_: Mesh) -> PositiveRun:
        return run

    monkeypatch.setattr(section6, "positive_path", the_run)
    await section6.test_check_18_create_claim_get_names_caller(mesh)
    await section6.test_check_19_update_blocked_keeps_binding(mesh)
    await section6.test_check_20_commit_evidence_round_trips(mesh)
    await section6.test_check_21_update_done_keeps_binding(mesh)
    await section6.test_check_22_my_tasks_lists_claimed_and_done(mesh)
    await section6.test_check_23_board_changed_carries_only_counter_and_time(mesh)
    await section6.test_check_24_change_seq_monotone_and_applied_limit_always(mesh)

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
    # The bridge's own writes come back on the next poll as echoes: nothing changes.
    seq = (await list_page(mesh.caller("reader")))["changeSeq"]
    mesh.fake.advance(5)
    assert (await mesh.poll()).changed == 0
    assert (await list_page(mesh.caller("reader")))["changeSeq"] == seq


async def test_section6_sequence_on_ep_v1(mesh: GitLabMesh) -> None:
    await section6.test_section6_sequence_on_ep_v1(mesh)
    assert [i.title for i in mesh.fake.project(PROJECT).issues.values()] == [
        "On the versioned rail"
    ]


async def test_check_23_a_change_made_on_gitlab_is_announced(mesh: GitLabMesh) -> None:
    reader = mesh.caller("reader")
    task = await create(reader, "Edited on GitLab")
    queue, sub = await board_events(mesh.nc)
    issue = issue_titled(mesh.fake, "Edited on GitLab")
    mesh.fake.advance(30)
    mesh.fake.set_labels(issue, ["workflow::won't do"])
    mesh.fake.close_issue(PROJECT, issue.iid)
    assert (await mesh.poll()).changed == 1
    await mesh.nc.flush()
    events: list[Msg] = await collect(queue, 0.5)
    await sub.unsubscribe()
    assert len(events) == 1
    data = json.loads(events[0].data)["data"]
    assert set(data) == {"changeSeq", "observedAt"}
    assert data["changeSeq"] == (await list_page(reader))["changeSeq"]
    assert task["taskId"] not in events[0].data.decode()
    record = await get(reader, task["taskId"])
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
    # The account maps back to the principal, but the uid is whatever presence says now,
    # and who bound it, when, and the environment are gone.
    assert binding_triple(again) == {
        "owner": "local",
        "actor": "worker",
        "lifecycleUid": reborn.lifecycleUid,
    }
    assert again["binding"]["boundBy"] == "tracker-sync"
    assert "environment" not in again["binding"]
    assert again["binding"] != held["binding"]
    # A seat without an account: GitLab shows only the label, so the task reads open.
    assert (other["status"], other["statusSource"]) == ("open", CLAIMED)
    assert "binding" not in other
    assert other["evidence"] == []  # the run evidence was a note; notes are not read
