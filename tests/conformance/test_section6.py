"""Section 6 of the tasks endpoint contract, check by check, over the real wire.

Every test runs a real nats-server and the real bridge (SQLite board) and talks to it as
a Cotal caller would: request subjects carrying the caller triple, envelopes pinned to the
digests read from ``EPC_<space>``, replies read on the caller's own reply rail. Check 9's
broker half runs a second nats-server whose users hold exactly the rows ``cotal-tasks
grants`` prints, so the refusal it observes is the broker's, not the bridge's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.bridge.runtime import running_bridge
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.client import TasksClient, TasksError
from cotal_tasks.core import ErrorCode, Seat
from tests.conformance.conftest import SMALL_PAGE_CEILING, Mesh
from tests.conformance.permissioned import (
    Errors,
    _violations,
    permission_rows,
    permissioned_bridge_config,
    permissioned_callers,
    permissioned_users,
)
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, broker, set_up_space
from tests.support.cotal import Bound, TestCaller, collect, nonce

Json = dict[str, Any]

TOKEN = ENDPOINT.replace(".", "_")
PREFIX = f"cotal.{SPACE}"
BOARD_CHANGED_FILTER = f"{PREFIX}.epe.{TOKEN}.*.*.ev.ai_cotal_tasks.board-changed"

# Section 1's command table, written out: capability and targeting shape per command.
CONTRACT_TABLE: dict[str, tuple[str, str]] = {
    "list-tasks": ("tasks.read", "untargeted"),
    "get-task": ("tasks.read", "untargeted"),
    "my-tasks": ("tasks.self", "targeted, mode self"),
    "create-task": ("tasks.write", "untargeted"),
    "bind-task": ("tasks.bind", "targeted, modes owner and any"),
    "claim-task": ("tasks.self", "targeted, mode self"),
    "update-task": ("tasks.self", "targeted, mode self"),
    "administer-task": ("tasks.admin", "untargeted"),
}

# Section 2: every field a record (and its binding and evidence) may carry.
TASK_FIELDS = {
    "version",
    "taskId",
    "space",
    "title",
    "brief",
    "status",
    "statusSource",
    "binding",
    "evidence",
    "createdAt",
    "updatedAt",
}
BINDING_FIELDS = {
    "owner",
    "actor",
    "lifecycleUid",
    "environment",
    "environmentWithheld",
    "boundAt",
    "boundBy",
}
EVIDENCE_FIELDS = {"kind", "ref", "addedAt"}
REQUIRED_TASK_FIELDS = {
    "version",
    "taskId",
    "space",
    "title",
    "status",
    "evidence",
    "createdAt",
    "updatedAt",
}


# -- helpers ----------------------------------------------------------------------------


def triple(caller: TestCaller) -> Json:
    s = caller.seat
    return {"owner": s.owner, "actor": s.actor, "lifecycleUid": s.lifecycleUid}


def binding_triple(record: Json) -> Json:
    b = record["binding"]
    return {"owner": b["owner"], "actor": b["actor"], "lifecycleUid": b["lifecycleUid"]}


async def create(caller: TestCaller, title: str, **fields: Any) -> Json:
    data: Json = await caller.ok("create-task", {"title": title, **fields})
    assert data["status"] == fields.get("status", "open")
    assert "binding" not in data
    return data


async def claim(caller: TestCaller, task_id: str) -> Json:
    data: Json = await caller.ok("claim-task", {"taskId": task_id}, mode="self")
    return data


async def get(caller: TestCaller, task_id: str) -> Json:
    data: Json = await caller.ok("get-task", {"taskId": task_id})
    return data


async def list_page(caller: TestCaller, **args: Any) -> Json:
    data: Json = await caller.ok("list-tasks", args)
    return data


async def my_ids(caller: TestCaller) -> list[str]:
    page: Json = await caller.ok("my-tasks", {}, mode="self")
    assert "appliedLimit" in page
    return [t["taskId"] for t in page["tasks"]]


def refusal(reply: Json) -> tuple[str, str | None]:
    """A failed reply's (code, outcome); asserts the envelope is a well-formed failure."""
    assert reply["ok"] is False, reply
    assert "data" not in reply, reply
    error: Json = reply["error"]
    return error["code"], error.get("outcome")


async def bind_as(operator: TestCaller, task_id: str, target: Seat, mode: str = "owner") -> Json:
    reply = await operator.call("bind-task", {"taskId": task_id}, mode=mode, target=target)
    assert reply["ok"], reply
    data: Json = reply["data"]
    return data


async def board_events(nc: NATS) -> tuple[asyncio.Queue[Msg], Any]:
    """Subscribe a reader to the board-changed filter; return its queue and subscription."""
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def put(msg: Msg) -> None:
        await queue.put(msg)

    sub = await nc.subscribe(BOARD_CHANGED_FILTER, cb=put)
    await nc.flush()
    return queue, sub


# -- 1 to 17 ----------------------------------------------------------------------------


async def _raw_artifact(nc: NATS, digest: str) -> bytes:
    subject = f"$JS.API.DIRECT.GET.EPC_{SPACE}.{PREFIX}.epc.{digest.removeprefix('sha256:')}"
    msg = await nc.request(subject, b"", timeout=5)
    assert "sha256:" + hashlib.sha256(msg.data).hexdigest() == digest, "artifact digest differs"
    return bytes(msg.data)


def targeting(row: Json) -> str:
    """The targeting shape as describeCmd prints it, from a cluster-document row."""
    if not row["targeted"]:
        assert "modes" not in row, row
        return "untargeted"
    modes: list[str] = row["modes"]
    assert len(set(modes)) == len(modes), row
    word = "mode" if len(modes) == 1 else "modes"
    return f"targeted, {word} " + " and ".join(modes)


async def test_check_01_describe_lists_eight_commands(mesh: Mesh) -> None:
    reader = mesh.caller("reader")
    bound = await reader.describe()
    descriptor = bound.descriptor
    assert descriptor["endpoint"] == ENDPOINT
    assert descriptor["protocol"] == {"v": 1}
    (cluster,) = descriptor["clusters"]
    # The document the caller reads is the one EPC holds under the advertised digest.
    manifest = json.loads(await _raw_artifact(mesh.nc, cluster["digest"]))
    assert manifest["v"] == 1
    assert manifest["members"] == []
    document = json.loads(await _raw_artifact(mesh.nc, manifest["root"]))
    assert document == bound.document
    assert document["urn"] == "ai.cotal.tasks"
    assert document["revision"] == 1
    assert document["attributes"] == []
    rows = {row["name"]: row for row in document["commands"]}
    assert len(rows) == len(document["commands"]) == 8
    assert sorted(cluster["commands"]) == sorted(CONTRACT_TABLE)
    described = {name: (row["capability"], targeting(row)) for name, row in rows.items()}
    assert described == CONTRACT_TABLE
    assert {row["class"] for row in rows.values()} == {"ephemeral"}


async def test_check_02_list_tasks_on_empty_board(mesh: Mesh) -> None:
    page = await list_page(mesh.caller("reader"))
    assert page["tasks"] == []
    for key in ("observedAt", "changeSeq", "appliedLimit"):
        assert isinstance(page[key], int), (key, page)
        assert not isinstance(page[key], bool)
    assert page["changeSeq"] >= 0
    assert page["appliedLimit"] >= 1
    assert "stale" not in page
    assert "nextCursor" not in page


def _spoil(path: Path) -> None:
    path.write_bytes(b"this is not an SQLite database, it is garbage \x00\xff" * 512)


async def test_check_03_unreadable_store_is_unavailable(mesh: Mesh) -> None:
    reader = mesh.caller("reader")
    worker = mesh.caller("worker")
    await create(reader, "A task that must not vanish into an empty page")
    assert len((await list_page(reader))["tasks"]) == 1

    config = mesh.bridge.config
    database = config.endpoints[0].database_url(config.data_dir).removeprefix("sqlite:///")
    await mesh.bridge.endpoints[0].store.close()  # the engine reconnects on next use
    for suffix in ("", "-wal", "-shm"):
        path = Path(database + suffix)
        if suffix == "" or path.exists():
            _spoil(path)

    for reply in (
        await reader.call("list-tasks", {}),
        await worker.call("my-tasks", {}, mode="self"),
    ):
        code, outcome = refusal(reply)
        assert code == "unavailable", reply
        assert outcome in ("executed", "not-executed", "unknown"), reply


async def test_check_04_get_absent_task_is_not_found(mesh: Mesh) -> None:
    reader = mesh.caller("reader")
    await create(reader, "Something present")
    reply = await reader.call("get-task", {"taskId": "t-absent000000"})
    code, _ = refusal(reply)
    assert code == "not-found"


async def test_check_05_my_tasks_self_and_untargeted(mesh: Mesh) -> None:
    me, other, operator = mesh.caller("me"), mesh.caller("other"), mesh.caller("operator")
    mine = await create(operator, "Mine")
    theirs = await create(operator, "Theirs")
    unbound = await create(operator, "Nobody's")
    await claim(me, mine["taskId"])
    await claim(other, theirs["taskId"])

    assert await my_ids(me) == [mine["taskId"]]
    assert await my_ids(other) == [theirs["taskId"]]
    assert unbound["taskId"] not in await my_ids(me)

    # Without a target mode: an untargeted my-tasks subject is refused by the bridge.
    code, outcome = refusal(await me.call("my-tasks", {}))
    assert code == "permission-denied"
    assert outcome == "not-executed"

    # The project's own caller refuses it itself, as bad-request, before publishing.
    spied: list[Msg] = []

    async def spy(msg: Msg) -> None:
        spied.append(msg)

    spy_sub = await mesh.nc.subscribe(f"{PREFIX}.ep.*.{TOKEN}.my-tasks.>", cb=spy)
    spy_v1 = await mesh.nc.subscribe(f"{PREFIX}.ep.v1.*.{TOKEN}.my-tasks.>", cb=spy)
    caller = TasksClient(mesh.nc, SPACE, ENDPOINT, me.seat, name="conformance")
    await caller.describe()
    with pytest.raises(TasksError) as refused:
        await caller.invoke("my-tasks")
    assert refused.value.code == ErrorCode.BAD_REQUEST
    assert refused.value.outcome == "not-executed"
    await mesh.nc.flush()
    await asyncio.sleep(0.2)
    assert spied == [], [m.subject for m in spied]
    # ...and the same caller with mode self is answered with the caller's own tasks.
    answer = await caller.invoke_answer("my-tasks", mode="self")
    assert answer.ok, answer.reply
    assert [t["taskId"] for t in answer.reply["data"]["tasks"]] == [mine["taskId"]]
    await mesh.nc.flush()
    await asyncio.sleep(0.1)
    assert len(spied) == 1, [m.subject for m in spied]
    await spy_sub.unsubscribe()
    await spy_v1.unsubscribe()


async def test_check_06_claim_binds_caller_and_repeats_same_record(mesh: Mesh) -> None:
    operator, worker = mesh.caller("operator"), mesh.caller("worker")
    task = await create(operator, "Claim me")
    before = (await list_page(operator))["changeSeq"]
    first = await claim(worker, task["taskId"])
    assert first["status"] == "claimed"
    assert binding_triple(first) == triple(worker)
    assert first["binding"]["boundBy"] == worker.seat.principal
    after_first = (await list_page(operator))["changeSeq"]
    assert after_first > before

    second = await claim(worker, task["taskId"])
    assert second == first
    assert second["updatedAt"] == first["updatedAt"]
    assert (await list_page(operator))["changeSeq"] == after_first
    assert await get(operator, task["taskId"]) == first


async def test_check_07_claim_of_foreign_task_is_conflict(mesh: Mesh) -> None:
    operator, holder, late = mesh.caller("operator"), mesh.caller("holder"), mesh.caller("late")
    task = await create(operator, "Contested")
    held = await claim(holder, task["taskId"])
    code, _ = refusal(await late.call("claim-task", {"taskId": task["taskId"]}, mode="self"))
    assert code == "conflict"
    assert await get(operator, task["taskId"]) == held


async def test_check_08_update_of_foreign_task_is_denied_and_unchanged(mesh: Mesh) -> None:
    operator, holder, intruder = (
        mesh.caller("operator"),
        mesh.caller("holder"),
        mesh.caller("intruder"),
    )
    task = await create(operator, "Not yours")
    held = await claim(holder, task["taskId"])
    reply = await intruder.call(
        "update-task",
        {
            "taskId": task["taskId"],
            "status": "done",
            "brief": "Taken over",
            "evidence": [{"kind": "commit", "ref": "deadbeef"}],
            "note": "mine now",
        },
        mode="self",
    )
    code, _ = refusal(reply)
    assert code == "permission-denied"
    assert await get(operator, task["taskId"]) == held


async def test_check_09_operator_bind_records_target_triple(mesh: Mesh) -> None:
    operator, target = mesh.caller("operator"), mesh.caller("worker", 7)
    await mesh.space.spawn(target.seat)
    task = await create(operator, "Bind me")
    bound = await bind_as(operator, task["taskId"], target.seat)
    assert bound["status"] == "claimed"
    assert binding_triple(bound) == triple(target)
    assert bound["binding"]["boundBy"] == operator.seat.principal
    assert await get(operator, task["taskId"]) == bound
    assert await my_ids(target) == [task["taskId"]]


async def test_check_10_new_incarnation_does_not_inherit_binding(mesh: Mesh) -> None:
    operator = mesh.caller("operator")
    old, new = mesh.caller("worker", 1), mesh.caller("worker", 2)
    await mesh.space.spawn(old.seat)
    task = await create(operator, "Outlives its seat")
    held = await claim(old, task["taskId"])
    assert binding_triple(held) == triple(old)

    # The seat stops; a new one is spawned under the same name with a new lifecycle uid.
    await mesh.space.spawn(new.seat)

    record = await get(operator, task["taskId"])
    assert record["binding"]["lifecycleUid"] == old.seat.lifecycleUid
    assert record == held
    assert task["taskId"] not in await my_ids(new)
    code, _ = refusal(
        await new.call("update-task", {"taskId": task["taskId"], "status": "done"}, mode="self")
    )
    assert code == "permission-denied"
    assert await get(operator, task["taskId"]) == held


ADMISSIBLE_ENVIRONMENT = "k8s://cluster-a/ns/team-7 · räum ✓"
REFUSED_ENVIRONMENT = "https://user:pass@host/x"


async def test_check_11_environment_three_outcomes(mesh: Mesh) -> None:
    operator = mesh.caller("operator")
    cases: list[tuple[TestCaller, str | None]] = [
        (mesh.caller("envok"), ADMISSIBLE_ENVIRONMENT),
        (mesh.caller("envnone"), None),
        (mesh.caller("envbad"), REFUSED_ENVIRONMENT),
    ]
    for caller, environment in cases:
        await mesh.space.spawn(caller.seat, environment)

    for caller, environment in cases:
        claimed = await create(operator, f"Claimed by {caller.seat.actor}")
        bound = await create(operator, f"Bound to {caller.seat.actor}")
        records = [
            await claim(caller, claimed["taskId"]),
            await bind_as(operator, bound["taskId"], caller.seat),
        ]
        records += [await get(operator, r["taskId"]) for r in records]
        for record in records:
            binding = record["binding"]
            assert binding_triple(record) == triple(caller)
            if environment is None:
                assert "environment" not in binding, record
                assert "environmentWithheld" not in binding, record
            elif environment == ADMISSIBLE_ENVIRONMENT:
                assert binding["environment"] == environment, record
                assert binding["environment"].encode() == environment.encode()
                assert "environmentWithheld" not in binding, record
            else:
                assert "environment" not in binding, record
                assert binding["environmentWithheld"] is True, record
                text = json.dumps(record, ensure_ascii=False)
                assert "user:pass" not in text
                assert "pass@host" not in text


async def test_check_12_list_limit_is_capped_at_ceiling(small_mesh: Mesh) -> None:
    reader = small_mesh.caller("reader")
    ids = [(await create(reader, f"Task {i}"))["taskId"] for i in range(SMALL_PAGE_CEILING + 2)]
    first = await list_page(reader, limit=100_000)
    assert first["appliedLimit"] == SMALL_PAGE_CEILING
    assert len(first["tasks"]) == SMALL_PAGE_CEILING
    assert "nextCursor" in first
    rest = await list_page(reader, limit=100_000, cursor=first["nextCursor"])
    assert rest["appliedLimit"] == SMALL_PAGE_CEILING
    assert len(rest["tasks"]) == 2
    assert "nextCursor" not in rest
    assert sorted(t["taskId"] for t in first["tasks"] + rest["tasks"]) == sorted(ids)


SECRETS = {
    "title": "password=hunter2-correct-horse",
    "brief": "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig",
}


def _only_record_fields(record: Json, *, summary: bool = False) -> None:
    assert set(record) <= TASK_FIELDS, set(record) - TASK_FIELDS
    assert set(record) >= REQUIRED_TASK_FIELDS - ({"evidence"} if summary else set())
    if "binding" in record:
        assert set(record["binding"]) <= BINDING_FIELDS
    for entry in record.get("evidence", []):
        assert set(entry) == EVIDENCE_FIELDS


async def test_check_13_records_carry_no_secret(mesh: Mesh) -> None:
    operator, worker = mesh.caller("operator"), mesh.caller("worker")
    before = await list_page(operator)
    for key, secret in SECRETS.items():
        args = {"title": "Harmless title", key: secret}
        reply = await operator.call("create-task", args)
        code, _ = refusal(reply)
        assert code == "bad-request", reply
        assert secret not in json.dumps(reply), "the refusal quotes the secret"
    after = await list_page(operator)
    assert after["tasks"] == []
    assert after["changeSeq"] == before["changeSeq"]

    task = await create(
        operator, "Rotate the staging certificates", brief="The key lives in the team vault."
    )
    await claim(worker, task["taskId"])
    code, _ = refusal(
        await worker.call(
            "update-task",
            {"taskId": task["taskId"], "evidence": [{"kind": "run", "ref": "token=abc123"}]},
            mode="self",
        )
    )
    assert code == "bad-request"
    record = await get(operator, task["taskId"])
    _only_record_fields(record)
    assert record["evidence"] == []
    page = await list_page(operator)
    for summary in page["tasks"]:
        _only_record_fields(summary, summary=True)
        assert "brief" not in summary
        assert "evidence" not in summary
    text = json.dumps([record, page], ensure_ascii=False)
    for secret in (*SECRETS.values(), "token=abc123"):
        assert secret not in text


async def test_check_14_create_with_pinned_id_creates_one_task(mesh: Mesh) -> None:
    operator = mesh.caller("operator")
    pinned = "conformance-" + secrets.token_hex(8)
    first = await operator.ok("create-task", {"title": "Only once"}, request_id=pinned)
    seq = (await list_page(operator))["changeSeq"]
    second = await operator.ok("create-task", {"title": "Only once"}, request_id=pinned)
    assert second == first
    page = await list_page(operator)
    assert [t["taskId"] for t in page["tasks"]] == [first["taskId"]]
    assert page["changeSeq"] == seq


async def test_check_15_create_refuses_bound_statuses(mesh: Mesh) -> None:
    operator = mesh.caller("operator")
    for status in ("claimed", "blocked"):
        code, outcome = refusal(
            await operator.call("create-task", {"title": "x", "status": status})
        )
        assert code == "bad-request", status
        assert outcome == "not-executed"
    assert (await list_page(operator))["tasks"] == []


async def test_check_16_update_to_open_while_bound_is_bad_request(mesh: Mesh) -> None:
    operator, worker = mesh.caller("operator"), mesh.caller("worker")
    task = await create(operator, "Stay bound")
    held = await claim(worker, task["taskId"])
    code, _ = refusal(
        await worker.call("update-task", {"taskId": task["taskId"], "status": "open"}, mode="self")
    )
    assert code == "bad-request"
    assert await get(operator, task["taskId"]) == held


async def test_check_17_administer_unbind_reopens_and_clears_binding(mesh: Mesh) -> None:
    operator, worker = mesh.caller("operator"), mesh.caller("worker")
    task = await create(operator, "Seat is gone")
    await claim(worker, task["taskId"])
    freed: Json = await operator.ok(
        "administer-task", {"taskId": task["taskId"], "unbind": True, "note": "Seat is gone."}
    )
    assert freed["status"] == "open"
    assert "binding" not in freed
    assert await get(operator, task["taskId"]) == freed
    assert task["taskId"] not in await my_ids(worker)


# -- 9, the broker half: a permissioned nats-server from `cotal-tasks grants` rows ------


@dataclass
class Permissioned:
    """A broker whose users hold exactly the `cotal-tasks grants` rows, and the bridge on it."""

    log: Path
    seat: TestCaller  # holds tasks.self only
    operator: TestCaller  # holds tasks.read, tasks.write, tasks.bind, tasks.self
    seat_errors: Errors
    operator_errors: Errors
    served: list[tuple[str, str]]  # (command, code) for every request the bridge answered
    routed: list[str]  # every ep.> subject the broker delivered, as an admin sees it

    def bridge_denials(self) -> list[str]:
        return _violations(self.log, "cotal-tasks")


@asynccontextmanager
async def permissioned_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Permissioned]:
    seat_seat, operator_seat = seat("seat", 3), seat("operator", 4)
    data_dir = tmp_path / "bridge"
    # A previous run of this endpoint minted its instance id, so --serve pins it.
    identity = next_incarnation(data_dir, TOKEN)
    serve, seat_rows, operator_rows = await permission_rows(
        tmp_path, data_dir, seat_seat, operator_seat
    )
    assert any(identity.instance_id in row for row in serve["publish"]["allow"]), serve
    assert not any(".bind-task." in row for row in seat_rows["publish"]["allow"]), seat_rows
    assert any(".bind-task.owner.local." in row for row in operator_rows["publish"]["allow"])
    passwords, server_conf = permissioned_users(
        tmp_path, monkeypatch, serve, seat_rows, operator_rows
    )
    served: list[tuple[str, str]] = []

    def on_served(command: str, code: str, _elapsed: float) -> None:
        served.append((command, code))

    async with broker(tmp_path, config_file=server_conf) as server:
        log = server.store_dir / "nats-server.log"
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = permissioned_bridge_config(server.url, data_dir, EndpointConfig(name=ENDPOINT))
        bridge_cm = running_bridge(config, on_served=on_served)
        try:
            bridge = await asyncio.wait_for(bridge_cm.__aenter__(), timeout=20)
        except Exception as exc:
            raise AssertionError(
                "the bridge did not start under its --serve rows; the broker denied: "
                f"{_violations(log, 'cotal-tasks')}"
            ) from exc
        try:
            assert bridge.servers[0].identity.instance_id == identity.instance_id
            seat_errors, operator_errors = Errors(), Errors()
            async with permissioned_callers(
                server.url, passwords, seat_seat, operator_seat, seat_errors, operator_errors
            ) as (seat_caller, operator_caller, routed):
                yield Permissioned(
                    log,
                    seat_caller,
                    operator_caller,
                    seat_errors,
                    operator_errors,
                    served,
                    routed,
                )
        finally:
            await bridge_cm.__aexit__(None, None, None)


async def test_check_09_self_only_bind_is_refused_by_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with permissioned_mesh(tmp_path, monkeypatch) as mesh:
        target = mesh.seat.seat
        task = await create(mesh.operator, "Only an operator binds this")
        # The seat's credential works for what it holds...
        assert await my_ids(mesh.seat) == []
        # ...but the bind-task call an operator makes is denied at publish, in either mode.
        for mode in ("owner", "any"):
            request_nonce = nonce()
            subject = mesh.seat.subject(
                "bind-task", request_nonce, mode=mode, target_owner=target.owner
            )
            body = mesh.seat.envelope("bind-task", args={"taskId": task["taskId"]}, target=target)
            got = await mesh.seat.exchange(
                subject, json.dumps(body).encode(), request_nonce, wait=1.0
            )
            assert got is None, f"a reply came for a publish the broker should deny: {got}"
            assert mesh.seat_errors.denied_publish(subject), mesh.seat_errors.seen
            assert subject not in mesh.routed
        assert not any(command == "bind-task" for command, _ in mesh.served), mesh.served
        record = await get(mesh.operator, task["taskId"])
        assert record["status"] == "open"
        assert "binding" not in record
        assert mesh.operator_errors.seen == []
        assert mesh.bridge_denials() == []


async def test_check_09_operator_bind_is_admitted_under_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with permissioned_mesh(tmp_path, monkeypatch) as mesh:
        target = mesh.seat.seat
        task = await create(mesh.operator, "Only an operator binds this")
        request_nonce = nonce()
        subject = mesh.operator.subject(
            "bind-task", request_nonce, mode="owner", target_owner=target.owner
        )
        body = mesh.operator.envelope("bind-task", args={"taskId": task["taskId"]}, target=target)
        got = await mesh.operator.exchange(
            subject, json.dumps(body).encode(), request_nonce, wait=8.0
        )
        denials = mesh.bridge_denials()
        assert got is not None, (
            f"bind-task was not answered; the broker denied the bridge {denials}"
        )
        reply = got[1]
        assert reply["ok"], (reply, denials)
        bound: Json = reply["data"]
        assert bound["status"] == "claimed"
        assert binding_triple(bound) == triple(mesh.seat)
        assert bound["binding"]["boundBy"] == mesh.operator.seat.principal
        assert ("bind-task", "ok") in mesh.served
        assert subject in mesh.routed
        assert await my_ids(mesh.seat) == [task["taskId"]]
        assert mesh.operator_errors.seen == []
        assert denials == []


# -- 18 to 24: the positive path on one task --------------------------------------------

COMMIT_REF = "9f2c1e7 refs/heads/feat@{1}^~2 ✓ ünïcode"
RUN_REF = "run-41"


@dataclass
class PositiveRun:
    """Everything a reviewer observes running checks 18 to 21 on one task."""

    worker: TestCaller
    created: Json
    replies: dict[str, Json] = field(default_factory=dict)  # step -> reply envelope
    records: dict[str, Json] = field(default_factory=dict)  # step -> get-task data
    mine: dict[str, list[str]] = field(default_factory=dict)  # step -> my-tasks ids
    pages: list[Json] = field(default_factory=list)  # list-tasks after each step
    my_pages: list[Json] = field(default_factory=list)
    events: list[Msg] = field(default_factory=list)


async def positive_path(mesh: Mesh) -> PositiveRun:
    """create → claim → blocked with a note → commit evidence → done, observing each step.

    Replies are recorded, not asserted, so each check asserts its own step.
    """
    reader, operator, worker = mesh.caller("reader"), mesh.caller("operator"), mesh.caller("w")
    queue, sub = await board_events(mesh.nc)
    pages: list[Json] = [await list_page(reader)]
    created = await create(
        operator, "Ship the parser", brief="Ship it.", evidence=[{"kind": "run", "ref": RUN_REF}]
    )
    run = PositiveRun(worker, created, pages=pages)
    task_id = created["taskId"]

    async def step(name: str, command: str, args: Json) -> None:
        run.replies[name] = await worker.call(command, {"taskId": task_id, **args}, mode="self")
        run.records[name] = await get(reader, task_id)
        run.pages.append(await list_page(reader))
        my_page: Json = await worker.ok("my-tasks", {}, mode="self")
        run.my_pages.append(my_page)
        run.mine[name] = [t["taskId"] for t in my_page["tasks"]]

    await step("claimed", "claim-task", {})
    await step("blocked", "update-task", {"status": "blocked", "note": "Waiting on review."})
    await step("evidence", "update-task", {"evidence": [{"kind": "commit", "ref": COMMIT_REF}]})
    await step("done", "update-task", {"status": "done", "note": "Merged."})
    await mesh.nc.flush()
    run.events = await collect(queue, 0.5)
    await sub.unsubscribe()
    return run


async def test_check_18_create_claim_get_names_caller(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    assert run.replies["claimed"]["ok"], run.replies["claimed"]
    record = run.records["claimed"]
    assert record["taskId"] == run.created["taskId"]
    assert record["status"] == "claimed"
    assert binding_triple(record) == triple(run.worker)


async def test_check_19_update_blocked_keeps_binding(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    assert run.replies["blocked"]["ok"], run.replies["blocked"]
    record = run.records["blocked"]
    assert record["status"] == "blocked"
    assert record["binding"] == run.records["claimed"]["binding"]


async def test_check_20_commit_evidence_round_trips(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    assert run.replies["evidence"]["ok"], run.replies["evidence"]
    before = run.records["blocked"]["evidence"]
    after = run.records["evidence"]["evidence"]
    assert [e for e in before if e["kind"] == "run"] == [
        {"kind": "run", "ref": RUN_REF, "addedAt": before[0]["addedAt"]}
    ]
    commits = [e for e in after if e["kind"] == "commit"]
    assert len(commits) == 1
    assert commits[0]["ref"].encode() == COMMIT_REF.encode()
    assert isinstance(commits[0]["addedAt"], int)
    assert commits[0]["addedAt"] > 0
    assert [e for e in after if e["kind"] != "commit"] == before
    assert run.records["evidence"]["status"] == "blocked"
    assert run.records["evidence"]["binding"] == run.records["claimed"]["binding"]


async def test_check_21_update_done_keeps_binding(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    assert run.replies["done"]["ok"], run.replies["done"]
    record = run.records["done"]
    assert record["status"] == "done"
    assert record["binding"] == run.records["claimed"]["binding"]
    assert record["evidence"] == run.records["evidence"]["evidence"]


async def test_check_22_my_tasks_lists_claimed_and_done(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    task_id = run.created["taskId"]
    assert run.mine["claimed"] == [task_id]
    assert run.mine["done"] == [task_id]
    done_summary = run.my_pages[-1]["tasks"][0]
    assert done_summary["status"] == "done"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_check_23_board_changed_carries_only_counter_and_time(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    assert run.events, "no board-changed event across checks 18 to 21"
    record = run.records["done"]
    forbidden = [record["taskId"], record["title"], "Ship", "open", "claimed", "blocked", "done"]
    seqs: list[int] = []
    for msg in run.events:
        assert msg.subject.startswith(f"{PREFIX}.epe.{TOKEN}.")
        assert msg.subject.endswith(".ev.ai_cotal_tasks.board-changed")
        event = json.loads(msg.data)
        assert event["v"] == 1
        assert event["topic"] == "ev.ai_cotal_tasks.board-changed"
        data = event["data"]
        assert set(data) == {"changeSeq", "observedAt"}, data
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in data.values())
        seqs.append(data["changeSeq"])
        body = msg.data.decode()
        for text in forbidden:
            assert text not in body, (text, body)
        assert not any(text in s for s in _strings(event) for text in forbidden)
    assert seqs == sorted(seqs)


async def test_check_24_change_seq_monotone_and_applied_limit_always(mesh: Mesh) -> None:
    run = await positive_path(mesh)
    seqs = [page["changeSeq"] for page in run.pages]
    assert seqs == sorted(seqs), seqs
    assert seqs[-1] > seqs[0], seqs
    for page in (*run.pages, *run.my_pages):
        assert isinstance(page["appliedLimit"], int)
        assert page["appliedLimit"] >= 1


# -- the versioned rail -----------------------------------------------------------------


async def _exchange_v1(
    caller: TestCaller, command: str, generation: str, body: Json, mode: str | None = None
) -> tuple[Msg, Json, str]:
    request_nonce = nonce()
    subject = caller.subject(command, request_nonce, mode=mode, rail="ep.v1", generation=generation)
    got = await caller.exchange(subject, json.dumps(body).encode(), request_nonce, rail="ep.v1")
    assert got is not None, f"{command} on ep.v1 was not answered"
    msg, reply = got
    return msg, reply, request_nonce


async def test_section6_sequence_on_ep_v1(mesh: Mesh) -> None:
    caller = mesh.caller("versioned")
    generation = secrets.token_hex(16)
    identity = mesh.bridge.servers[0].identity
    s = caller.seat
    on_plain_rail: list[Msg] = []

    async def plain(msg: Msg) -> None:
        on_plain_rail.append(msg)

    plain_sub = await mesh.nc.subscribe(f"{PREFIX}.ep.reply.>", cb=plain)

    def expected_reply(request_nonce: str) -> str:
        return (
            f"{PREFIX}.ep.v1.reply.{TOKEN}.{identity.instance_id}.{identity.epoch}."
            f"{s.owner}.{s.actor}.{s.lifecycleUid}.{generation}.{request_nonce}"
        )

    body = caller.envelope("describe", args=None, digests=False)
    msg, reply, request_nonce = await _exchange_v1(caller, "describe", generation, body)
    assert reply["ok"], reply
    assert msg.subject == expected_reply(request_nonce)
    descriptor = reply["data"]["descriptor"]
    manifest = await caller.artifact(descriptor["clusters"][0]["digest"])
    document = await caller.artifact(manifest["root"])
    caller.bound = Bound(identity.instance_id, identity.epoch, descriptor, document)
    assert sorted(r["name"] for r in document["commands"]) == sorted(CONTRACT_TABLE)

    steps: Sequence[tuple[str, str | None]] = (
        ("create-task", None),
        ("claim-task", "self"),
        ("get-task", None),
    )
    task_id: str | None = None
    results: dict[str, Json] = {}
    for command, mode in steps:
        args: Json = {"title": "On the versioned rail"} if task_id is None else {"taskId": task_id}
        body = caller.envelope(command, args=args)
        msg, reply, request_nonce = await _exchange_v1(caller, command, generation, body, mode)
        assert reply["ok"], reply
        assert reply["id"] == body["id"]
        assert msg.subject == expected_reply(request_nonce)
        results[command] = reply["data"]
        task_id = reply["data"]["taskId"]
    assert results["claim-task"]["status"] == "claimed"
    assert binding_triple(results["claim-task"]) == triple(caller)
    assert results["get-task"] == results["claim-task"]
    await mesh.nc.flush()
    assert on_plain_rail == [], [m.subject for m in on_plain_rail]
    await plain_sub.unsubscribe()
