"""The first three write commands over the real board (SQLite and PostgreSQL): create,
claim and bind, each success path and each refusal with its exact code and ``outcome:
not-executed``. Update, administer and the positive path are in
``test_service_updates.py``."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ErrorCode, Mode
from tests.bridge._support import ALICE, ALICE_REBORN, BOB, OPERATOR, Client, bound_triple, triple
from tests.conftest import Clock, seat

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
    await client.refused_claim(ErrorCode.CONFLICT, BOB, task_id)
    assert await client.get(task_id) == claimed
    assert await client.change_seq() == seq


async def test_claim_task_of_an_absent_task_is_not_found(client: Client) -> None:
    await client.refused_claim(ErrorCode.NOT_FOUND, ALICE, "t-absent")


@pytest.mark.parametrize("status", ["done", "dropped"])
async def test_claim_task_of_a_terminal_task_is_a_failed_precondition(
    client: Client, status: str
) -> None:
    task = await client.create(status=status)
    await client.refused_claim(ErrorCode.FAILED_PRECONDITION, ALICE, task["taskId"])
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


@pytest.mark.parametrize(
    "expected",
    [
        pytest.param(None, id="null on a bound task"),
        pytest.param(triple(BOB), id="stale: another seat"),
        pytest.param(triple(ALICE_REBORN), id="stale: another incarnation"),
    ],
)
async def test_bind_task_with_an_expected_binding_that_does_not_hold_is_a_conflict(
    client: Client, expected: dict[str, str] | None
) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused_bind(ErrorCode.CONFLICT, BOB, task_id, expectedBinding=expected)
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
    await client.refused_bind(ErrorCode.NOT_FOUND, BOB, "t-absent")
    done = await client.create(status="done")
    await client.refused_bind(ErrorCode.FAILED_PRECONDITION, BOB, done["taskId"])
    assert await client.get(done["taskId"]) == done
