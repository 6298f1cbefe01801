"""The five write commands over the real board (SQLite and PostgreSQL): each success
path, each refusal with its exact code and ``outcome: not-executed``, and the positive
path of contract checks 18 to 24."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ErrorCode, Mode
from tests.bridge._support import OPERATOR, Client, bound_triple, triple
from tests.conftest import Clock, seat

ALICE = seat("alice", 1)
BOB = seat("bob", 2)
ALICE_REBORN = seat("alice", 3)  # same principal local.alice, a new lifecycle uid


# create-task


async def test_create_task_returns_an_open_unbound_record(client: Client, clock: Clock) -> None:
    task = await client.create("Rotate the staging certificates")
    assert task == {
        "version": "ai.cotal.tasks.task/v1",
        "taskId": task["taskId"],
        "space": "demo",
        "title": "Rotate the staging certificates",
        "status": "open",
        "evidence": [],
        "createdAt": clock.ms,
        "updatedAt": clock.ms,
    }
    assert await client.get(task["taskId"]) == task
    assert await client.change_seq() == 1


async def test_create_task_keeps_brief_terminal_status_and_evidence(
    client: Client, clock: Clock
) -> None:
    task = await client.create(
        "Ship it",
        brief="Before Friday.",
        status="done",
        evidence=[{"kind": "review", "ref": "PR 42"}],
    )
    assert task["brief"] == "Before Friday."
    assert task["status"] == "done"
    assert "binding" not in task
    assert task["evidence"] == [{"kind": "review", "ref": "PR 42", "addedAt": clock.ms}]


@pytest.mark.parametrize("status", ["claimed", "blocked"])
async def test_create_task_refuses_a_bound_status_and_creates_nothing(
    client: Client, status: str
) -> None:
    await client.refused(
        ErrorCode.BAD_REQUEST, "create-task", OPERATOR, {"title": "x", "status": status}
    )
    assert await client.change_seq() == 0
    assert (await client.list_tasks())["tasks"] == []


MALFORMED_CREATE_ARGS: list[dict[str, Any]] = [
    {},
    {"title": ""},
    {"title": "x" * 201},
    {"title": "password: hunter2"},
    {"title": "x", "brief": None},
    {"title": "x", "status": "pending"},
    {"title": "x", "binding": triple(ALICE)},
    {"title": "x", "evidence": [{"kind": "pr", "ref": "1"}]},
    {"title": "x", "evidence": [{"kind": "commit", "ref": "1", "addedAt": 5}]},
]


async def test_create_task_refuses_malformed_args(client: Client) -> None:
    for args in MALFORMED_CREATE_ARGS:
        await client.refused(ErrorCode.BAD_REQUEST, "create-task", OPERATOR, args)
    assert await client.change_seq() == 0
    assert (await client.list_tasks())["tasks"] == []


# claim-task


async def test_claim_task_binds_an_open_task_to_the_caller(client: Client, clock: Clock) -> None:
    task_id = (await client.create())["taskId"]
    clock.advance_ms(1000)
    claimed = await client.claim(ALICE, task_id)
    assert claimed["status"] == "claimed"
    assert claimed["binding"] == {
        **triple(ALICE),
        "boundAt": clock.ms,
        "boundBy": ALICE.principal,
    }
    assert claimed["updatedAt"] == clock.ms
    assert await client.get(task_id) == claimed


async def test_claim_task_by_a_second_seat_is_a_conflict(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    seq = await client.change_seq()
    await client.refused(ErrorCode.CONFLICT, "claim-task", BOB, {"taskId": task_id}, mode="self")
    assert await client.get(task_id) == claimed
    assert await client.change_seq() == seq


async def test_claim_task_of_an_absent_task_is_not_found(client: Client) -> None:
    await client.refused(
        ErrorCode.NOT_FOUND, "claim-task", ALICE, {"taskId": "t-absent"}, mode="self"
    )


@pytest.mark.parametrize("status", ["done", "dropped"])
async def test_claim_task_of_a_terminal_task_is_a_failed_precondition(
    client: Client, status: str
) -> None:
    task = await client.create(status=status)
    await client.refused(
        ErrorCode.FAILED_PRECONDITION, "claim-task", ALICE, {"taskId": task["taskId"]}, mode="self"
    )
    assert await client.get(task["taskId"]) == task


# bind-task


@pytest.mark.parametrize("mode", ["owner", "any"])
async def test_bind_task_binds_the_target_and_records_the_caller_as_binder(
    client: Client, clock: Clock, mode: Mode
) -> None:
    lead = seat("lead", 7)
    task_id = (await client.create())["taskId"]
    bound = await client.bind(ALICE, task_id, mode=mode, caller=lead)
    assert bound["status"] == "claimed"
    assert bound["binding"] == {**triple(ALICE), "boundAt": clock.ms, "boundBy": "local.lead"}
    assert await client.get(task_id) == bound


async def test_bind_task_with_expected_binding_null_on_a_bound_task_is_a_conflict(
    client: Client,
) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused(
        ErrorCode.CONFLICT,
        "bind-task",
        OPERATOR,
        {"taskId": task_id, "expectedBinding": None},
        mode="any",
        target=BOB,
    )
    assert await client.get(task_id) == claimed


async def test_bind_task_with_a_stale_expected_binding_is_a_conflict(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    for expected in (triple(BOB), triple(ALICE_REBORN)):
        await client.refused(
            ErrorCode.CONFLICT,
            "bind-task",
            OPERATOR,
            {"taskId": task_id, "expectedBinding": expected},
            mode="any",
            target=BOB,
        )
    assert await client.get(task_id) == claimed


async def test_bind_task_expected_binding_null_binds_an_unbound_task(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    bound = await client.call(
        "bind-task", OPERATOR, {"taskId": task_id, "expectedBinding": None}, mode="any", target=BOB
    )
    assert bound_triple(bound) == triple(BOB)


async def test_bind_task_rebinds_with_a_matching_expected_binding_keeping_the_status(
    client: Client,
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    await client.update(ALICE, task_id, status="blocked")
    moved = await client.call(
        "bind-task",
        OPERATOR,
        {"taskId": task_id, "expectedBinding": triple(ALICE)},
        mode="any",
        target=BOB,
    )
    assert moved["status"] == "blocked"
    assert bound_triple(moved) == triple(BOB)
    assert moved["binding"]["boundBy"] == OPERATOR.principal


async def test_bind_task_without_expected_binding_is_the_operator_override(
    client: Client,
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    moved = await client.bind(BOB, task_id)
    assert bound_triple(moved) == triple(BOB)
    assert moved["status"] == "claimed"


async def test_bind_task_refuses_absent_and_terminal_tasks(client: Client) -> None:
    await client.refused(
        ErrorCode.NOT_FOUND, "bind-task", OPERATOR, {"taskId": "t-absent"}, mode="any", target=BOB
    )
    done = await client.create(status="done")
    await client.refused(
        ErrorCode.FAILED_PRECONDITION,
        "bind-task",
        OPERATOR,
        {"taskId": done["taskId"]},
        mode="any",
        target=BOB,
    )
    assert await client.get(done["taskId"]) == done


# update-task


async def test_update_task_by_another_seat_is_denied_and_changes_nothing(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    seq = await client.change_seq()
    await client.refused(
        ErrorCode.PERMISSION_DENIED,
        "update-task",
        BOB,
        {"taskId": task_id, "status": "done", "note": "mine now"},
        mode="self",
    )
    assert await client.get(task_id) == claimed
    assert await client.change_seq() == seq


async def test_update_task_of_an_unbound_task_is_denied(client: Client) -> None:
    task = await client.create()
    await client.refused(
        ErrorCode.PERMISSION_DENIED,
        "update-task",
        ALICE,
        {"taskId": task["taskId"], "status": "done"},
        mode="self",
    )
    assert await client.get(task["taskId"]) == task


async def test_update_task_to_open_is_a_bad_request(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    error = await client.refused(
        ErrorCode.BAD_REQUEST,
        "update-task",
        ALICE,
        {"taskId": task_id, "status": "open"},
        mode="self",
    )
    assert "administer-task" in error.message
    assert await client.get(task_id) == claimed


async def test_update_task_of_an_absent_task_is_not_found(client: Client) -> None:
    await client.refused(
        ErrorCode.NOT_FOUND, "update-task", ALICE, {"taskId": "t-absent"}, mode="self"
    )


async def test_update_task_refuses_evidence_past_the_record_bound(client: Client) -> None:
    first = [{"kind": "commit", "ref": f"c{n}"} for n in range(20)]
    more = [{"kind": "run", "ref": f"r{n}"} for n in range(20)]
    task_id = (await client.create(evidence=first))["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused(
        ErrorCode.BAD_REQUEST,
        "update-task",
        ALICE,
        {"taskId": task_id, "evidence": more},
        mode="self",
    )
    assert await client.get(task_id) == claimed


# administer-task


@pytest.mark.parametrize("status", ["claimed", "blocked"])
async def test_administer_task_unbind_returns_a_working_task_to_the_board(
    client: Client, clock: Clock, status: str
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    if status == "blocked":
        await client.update(ALICE, task_id, status="blocked")
    clock.advance_ms(5)
    freed = await client.administer(task_id, unbind=True, note="seat is gone")
    assert freed["status"] == "open"
    assert "binding" not in freed
    assert freed["updatedAt"] == clock.ms
    assert await client.get(task_id) == freed


async def test_administer_task_unbind_on_a_terminal_task_keeps_the_status(
    client: Client,
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    await client.update(ALICE, task_id, status="done")
    freed = await client.administer(task_id, unbind=True)
    assert freed["status"] == "done"
    assert "binding" not in freed


async def test_administer_task_can_drop_a_bound_task_keeping_its_binding(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    dropped = await client.administer(task_id, status="dropped")
    assert dropped["status"] == "dropped"
    assert dropped["binding"] == claimed["binding"]


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        pytest.param({"note": "just a note"}, ErrorCode.BAD_REQUEST, id="no-status-no-unbind"),
        pytest.param({"status": "open"}, ErrorCode.BAD_REQUEST, id="open-while-bound"),
        pytest.param({"unbind": True, "status": "blocked"}, ErrorCode.BAD_REQUEST, id="unbound"),
        pytest.param({"unbind": False}, ErrorCode.BAD_REQUEST, id="unbind-false"),
        pytest.param({"unbind": "true"}, ErrorCode.BAD_REQUEST, id="unbind-string"),
    ],
)
async def test_administer_task_refusals_on_a_claimed_task(
    client: Client, fields: dict[str, Any], code: ErrorCode
) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused(code, "administer-task", OPERATOR, {"taskId": task_id, **fields})
    assert await client.get(task_id) == claimed


async def test_administer_task_cannot_assert_a_bound_status_on_an_unbound_task(
    client: Client,
) -> None:
    task = await client.create()
    for status in ("claimed", "blocked"):
        await client.refused(
            ErrorCode.BAD_REQUEST,
            "administer-task",
            OPERATOR,
            {"taskId": task["taskId"], "status": status},
        )
    await client.refused(
        ErrorCode.NOT_FOUND, "administer-task", OPERATOR, {"taskId": "t-absent", "unbind": True}
    )
    assert await client.get(task["taskId"]) == task


# Contract section 6, checks 18 to 24: one task from creation to terminal.


async def test_positive_path_from_creation_to_done(client: Client, clock: Clock) -> None:
    seqs: list[int] = []

    async def observe() -> None:
        page = await client.list_tasks(limit=10)
        assert page["appliedLimit"] == 10
        seqs.append(page["changeSeq"])

    await observe()
    task_id = (
        await client.create("Fix the flaky test", evidence=[{"kind": "branch", "ref": "fix/flaky"}])
    )["taskId"]
    await observe()

    # 18: claim, then get reads claimed with the caller triple.
    clock.advance_ms(10)
    await client.claim(ALICE, task_id)
    task = await client.get(task_id)
    assert task["status"] == "claimed"
    assert bound_triple(task) == triple(ALICE)
    binding = task["binding"]
    assert [t["taskId"] for t in (await client.my_tasks(ALICE))["tasks"]] == [task_id]
    await observe()

    # 19: blocked with a note; binding intact.
    clock.advance_ms(10)
    await client.update(ALICE, task_id, status="blocked", note="waiting on CI capacity")
    task = await client.get(task_id)
    assert task["status"] == "blocked"
    assert task["binding"] == binding
    await observe()

    # 20: commit evidence, byte for byte, addedAt set, the earlier entry undisturbed.
    clock.advance_ms(10)
    ref = "9f2c1e7a0b3d — refs/heads/fix/flaky ✓ ünïcode"
    earlier = task["evidence"]
    await client.update(ALICE, task_id, evidence=[{"kind": "commit", "ref": ref}])
    task = await client.get(task_id)
    assert task["evidence"] == [*earlier, {"kind": "commit", "ref": ref, "addedAt": clock.ms}]
    assert task["evidence"][1]["ref"].encode() == ref.encode()
    assert task["status"] == "blocked"
    await observe()

    # 21: done, binding still present.
    clock.advance_ms(10)
    await client.update(ALICE, task_id, status="done")
    task = await client.get(task_id)
    assert task["status"] == "done"
    assert task["binding"] == binding
    await observe()

    # 22: my-tasks still lists it at done.
    mine = await client.my_tasks(ALICE)
    assert [t["taskId"] for t in mine["tasks"]] == [task_id]
    assert mine["tasks"][0]["status"] == "done"
    assert "appliedLimit" in mine

    # 24: changeSeq never decreases; here it rises by exactly one per write.
    assert seqs == [0, 1, 2, 3, 4, 5]
