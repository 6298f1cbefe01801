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
