"""update-task and administer-task over the real board (SQLite and PostgreSQL), each
success path and each refusal with its exact code and ``outcome: not-executed``, and the
positive path of contract checks 18 to 24."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.core import ErrorCode
from tests.bridge._support import ALICE, BOB, Client, bound_triple, triple
from tests.conftest import Clock

# update-task


async def test_update_task_by_another_seat_is_denied_and_changes_nothing(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    seq = await client.change_seq()
    await client.refused_update(
        ErrorCode.PERMISSION_DENIED, BOB, task_id, status="done", note="mine now"
    )
    assert await client.get(task_id) == claimed
    assert await client.change_seq() == seq


async def test_update_task_of_an_unbound_task_is_denied(client: Client) -> None:
    task = await client.create()
    await client.refused_update(ErrorCode.PERMISSION_DENIED, ALICE, task["taskId"], status="done")
    assert await client.get(task["taskId"]) == task


async def test_update_task_to_open_is_a_bad_request(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    error = await client.refused_update(ErrorCode.BAD_REQUEST, ALICE, task_id, status="open")
    assert "administer-task" in error.message
    assert await client.get(task_id) == claimed


async def test_update_task_of_an_absent_task_is_not_found(client: Client) -> None:
    await client.refused_update(ErrorCode.NOT_FOUND, ALICE, "t-absent")


async def test_update_task_refuses_evidence_past_the_record_bound(client: Client) -> None:
    first = [{"kind": "commit", "ref": f"c{n}"} for n in range(20)]
    more = [{"kind": "run", "ref": f"r{n}"} for n in range(20)]
    task_id = (await client.create(evidence=first))["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused_update(ErrorCode.BAD_REQUEST, ALICE, task_id, evidence=more)
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
    await client.refused_administer(code, task_id, **fields)
    assert await client.get(task_id) == claimed


async def test_administer_task_cannot_assert_a_bound_status_on_an_unbound_task(
    client: Client,
) -> None:
    task = await client.create()
    for status in ("claimed", "blocked"):
        await client.refused_administer(ErrorCode.BAD_REQUEST, task["taskId"], status=status)
    await client.refused_administer(ErrorCode.NOT_FOUND, "t-absent", unbind=True)
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
