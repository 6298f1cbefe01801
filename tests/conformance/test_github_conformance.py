"""Section 6 of the tasks endpoint contract against a GitHub-backed endpoint, over the
real wire: a nats-server, the real bridge serving a ``provider = "github"`` endpoint
whose store is a mirror of the fake GitHub (served on loopback), and callers speaking
the wire. Each check runs the very function ``test_section6.py`` runs against the board
(so the two suites cannot drift), then asserts what GitHub itself was made to hold.
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
from tests.providers.github._support import (
    REPO,
    TOKEN_ENV,
    GitHubMesh,
    first_sync,
    github_config,
    github_mesh,
    open_github,
)
from tests.support.bridge import ENDPOINT, SPACE, TEST_HTTP, broker, set_up_space
from tests.support.cotal import Space, TestCaller, collect, nonce
from tests.support.fake_github import FakeGitHub, RecordedRequest, serve_fake_github
from tests.support.fake_github_model import Issue

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


# -- 1 to 17 -----------------------------------------------------------------------------


async def test_check_01_describe_lists_eight_commands(mesh: GitHubMesh) -> None:
    await section6.test_check_01_describe_lists_eight_commands(mesh)


async def test_check_02_list_tasks_on_empty_board(mesh: GitHubMesh) -> None:
    await section6.test_check_02_list_tasks_on_empty_board(mesh)
    (listing,) = mesh.fake.calls("GET", ISSUES)  # the empty board is an empty repository
    assert listing.status == 200


async def test_check_03_unreadable_store_is_unavailable(mesh: GitHubMesh) -> None:
    await section6.test_check_03_unreadable_store_is_unavailable(mesh)


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
    await section6.test_check_04_get_absent_task_is_not_found(mesh)
    reply = await mesh.caller("reader").call("get-task", {"taskId": f"{REPO}#999"})
    assert refusal(reply)[0] == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: GitHubMesh) -> None:
    await section6.test_check_05_my_tasks_self_and_untargeted(mesh)


async def test_check_06_claim_binds_caller_and_repeats_same_record(mesh: GitHubMesh) -> None:
    await section6.test_check_06_claim_binds_caller_and_repeats_same_record(mesh)
    issue = issue_titled(mesh.fake, "Claim me")
    assert (issue.assignees, issue.labels) == (["octobot"], ["in-progress"])
    n = issue.number
    # The repeated claim wrote nothing to GitHub.
    assert shape(writes_to(mesh.fake, issue)) == [
        ("POST", f"/{n}/assignees"),
        ("POST", f"/{n}/labels"),
    ]


async def test_check_07_claim_of_foreign_task_is_conflict(mesh: GitHubMesh) -> None:
    await section6.test_check_07_claim_of_foreign_task_is_conflict(mesh)
    issue = issue_titled(mesh.fake, "Contested")
    assert shape(writes_to(mesh.fake, issue)) == [("POST", f"/{issue.number}/labels")]


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(
    mesh: GitHubMesh,
) -> None:
    await section6.test_check_08_update_of_foreign_task_is_denied_and_unchanged(mesh)
    issue = issue_titled(mesh.fake, "Not yours")
    assert (issue.state, issue.comments, issue.body) == ("open", [], None)
    assert shape(writes_to(mesh.fake, issue)) == [("POST", f"/{issue.number}/labels")]


async def test_check_09_operator_bind_records_target_triple(mesh: GitHubMesh) -> None:
    await section6.test_check_09_operator_bind_records_target_triple(mesh)
    assert issue_titled(mesh.fake, "Bind me").labels == ["in-progress"]


async def test_check_10_new_incarnation_does_not_inherit_binding(mesh: GitHubMesh) -> None:
    await section6.test_check_10_new_incarnation_does_not_inherit_binding(mesh)
    operator, old, new = mesh.caller("operator"), mesh.caller("worker", 1), mesh.caller("worker", 2)
    issue = issue_titled(mesh.fake, "Outlives its seat")
    assert issue.assignees == ["octobot"]  # local.worker's account, whichever incarnation
    task_id = f"{REPO}#{issue.number}"
    held = await get(operator, task_id)
    # GitHub changes the issue and the sync reads it while the new incarnation is present.
    mesh.fake.advance(30)
    mesh.fake.set_title(issue, "Outlives its seat (retitled on GitHub)", "octocat")
    assert (await mesh.poll()).changed == 1
    record = await get(operator, task_id)
    assert record["title"] == "Outlives its seat (retitled on GitHub)"
    assert record["binding"] == held["binding"]
    assert binding_triple(record) == triple(old)
    assert task_id not in await my_ids(new)


async def test_check_11_environment_three_outcomes(mesh: GitHubMesh) -> None:
    await section6.test_check_11_environment_three_outcomes(mesh)
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
        await section6.test_check_12_list_limit_is_capped_at_ceiling(small)
        assert len(fake.repos[REPO].issues) == SMALL_PAGE_CEILING + 2


async def test_check_13_records_carry_no_secret(mesh: GitHubMesh) -> None:
    await section6.test_check_13_records_carry_no_secret(mesh)
    # Refused before GitHub: the only issue created is the harmless one.
    assert [i.title for i in mesh.fake.repos[REPO].issues.values()] == [
        "Rotate the staging certificates"
    ]
    # And what GitHub holds is filtered on the way in: credential-shaped text is left out.
    fake = mesh.fake
    fake.advance(30)
    leaked = fake.add_issue(REPO, section6.SECRETS["title"], section6.SECRETS["brief"])
    await mesh.poll()
    record = await get(mesh.caller("reader"), f"{REPO}#{leaked['number']}")
    section6._only_record_fields(record)
    text = json.dumps(record, ensure_ascii=False)
    for secret in section6.SECRETS.values():
        assert secret not in text
    assert "brief" not in record


async def test_check_14_create_with_pinned_id_creates_one_task(mesh: GitHubMesh) -> None:
    await section6.test_check_14_create_with_pinned_id_creates_one_task(mesh)
    assert len(mesh.fake.calls("POST", ISSUES)) == 1
    assert [i.title for i in mesh.fake.repos[REPO].issues.values()] == ["Only once"]


async def test_check_15_create_refuses_bound_statuses(mesh: GitHubMesh) -> None:
    await section6.test_check_15_create_refuses_bound_statuses(mesh)
    assert mesh.fake.writes == []


async def test_check_16_update_to_open_while_bound_is_bad_request(mesh: GitHubMesh) -> None:
    await section6.test_check_16_update_to_open_while_bound_is_bad_request(mesh)
    issue = issue_titled(mesh.fake, "Stay bound")
    assert (issue.state, issue.assignees, issue.labels) == ("open", ["octobot"], ["in-progress"])
    assert [r.method for r in writes_to(mesh.fake, issue)] == ["POST", "POST"]


async def test_check_17_administer_unbind_reopens_and_clears_binding(mesh: GitHubMesh) -> None:
    await section6.test_check_17_administer_unbind_reopens_and_clears_binding(mesh)
    issue = issue_titled(mesh.fake, "Seat is gone")
    assert (issue.state, issue.assignees, issue.labels) == ("open", [], [])
    assert [c.body for c in issue.comments] == ["Seat is gone."]


# -- 9, the broker half, with a GitHub-backed bridge ---------------------------------------


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
async def permissioned_github_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_url: str
) -> AsyncIterator[Permissioned]:
    """As ``section6.permissioned_mesh``, with the endpoint served from GitHub."""
    seat_seat, operator_seat = seat("seat", 3), seat("operator", 4)
    data_dir = tmp_path / "bridge"
    next_incarnation(data_dir, ENDPOINT.replace(".", "_"))
    toml = tmp_path / "tasks.toml"
    toml.write_text(
        f'space = "{SPACE}"\nnats_url = "nats://127.0.0.1:4222"\ndata_dir = "{data_dir}"\n'
        f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "github"\n'
        f'[endpoints.github]\nrepository = "{REPO}"\napi_url = "{api_url}"\n'
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
                EndpointConfig(name=ENDPOINT, provider="github", github=github_config(api_url)),
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeGitHub, github_url: str
) -> None:
    async with permissioned_github_mesh(tmp_path, monkeypatch, github_url) as mesh:
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
        assert issue.labels == []  # nothing reached GitHub either

        bound = await mesh.operator.ok(
            "bind-task", {"taskId": task["taskId"]}, mode="owner", target=target
        )
        assert bound["status"] == "claimed"
        assert binding_triple(bound) == {
            "owner": target.owner,
            "actor": target.actor,
            "lifecycleUid": target.lifecycleUid,
        }
        assert issue.labels == ["in-progress"]
        assert await my_ids(mesh.seat) == [task["taskId"]]
        assert mesh.bridge_denials() == []


# -- 18 to 24: the positive path -----------------------------------------------------------


async def test_checks_18_to_24_and_what_github_shows(
    mesh: GitHubMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checks 18 to 24 are section 6's own functions, each asserting its step of one run
    of the positive path (run once here, where ``test_section6`` runs it per check),
    then the same run as GitHub sees it: one issue, labelled, commented, closed."""
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
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    assert (issue.assignees, issue.labels) == (["hubot"], [])  # local.w is hubot
    assert [c.body for c in issue.comments] == [
        f"Evidence:\n- run: {RUN_REF}",
        "Waiting on review.",
        f"Evidence:\n- commit: {COMMIT_REF}",
        "Merged.",
    ]
    statuses = [run.records[step]["statusSource"] for step in run.records]
    assert statuses == ["in-progress", "blocked", "blocked", "closed"]
    # The bridge's own writes come back on the next poll as echoes: nothing changes.
    seq = (await list_page(mesh.caller("reader")))["changeSeq"]
    mesh.fake.advance(5)
    assert (await mesh.poll()).changed == 0
    assert (await list_page(mesh.caller("reader")))["changeSeq"] == seq


async def test_section6_sequence_on_ep_v1(mesh: GitHubMesh) -> None:
    await section6.test_section6_sequence_on_ep_v1(mesh)


async def test_check_23_a_change_made_on_github_is_announced(mesh: GitHubMesh) -> None:
    reader = mesh.caller("reader")
    task = await create(reader, "Edited on GitHub")
    queue, sub = await board_events(mesh.nc)
    issue = issue_titled(mesh.fake, "Edited on GitHub")
    mesh.fake.advance(30)
    mesh.fake.close_issue(REPO, issue.number, "not_planned")
    assert (await mesh.poll()).changed == 1
    await mesh.nc.flush()
    events: list[Msg] = await collect(queue, 0.5)
    await sub.unsubscribe()
    assert len(events) == 1
    data = json.loads(events[0].data)["data"]
    assert set(data) == {"changeSeq", "observedAt"}
    assert data["changeSeq"] == (await list_page(reader))["changeSeq"]
    assert task["taskId"] not in events[0].data.decode()
    assert (await get(reader, task["taskId"]))["status"] == "dropped"


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
    # The account maps back to the principal, but the uid is whatever presence says now,
    # and who bound it, when, and the environment are gone.
    assert binding_triple(again) == {"owner": "local", "actor": "worker",
                                     "lifecycleUid": reborn.lifecycleUid}  # fmt: skip
    assert again["binding"]["boundBy"] == "tracker-sync"
    assert "environment" not in again["binding"]
    assert again["binding"] != held["binding"]
    # A seat without an account: GitHub shows only the label, so the task reads open.
    assert (other["status"], other["statusSource"]) == ("open", "in-progress")
    assert "binding" not in other
    assert other["evidence"] == []  # the run evidence was a comment; comments are not read
