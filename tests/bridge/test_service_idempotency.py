"""Repeat safety and change accounting over the real board (SQLite and PostgreSQL):
idempotency by envelope id (create-task, update-task, administer-task) across a restart
and the retention window, idempotency by semantics (claim-task, bind-task), changeSeq,
the change listener and the task history."""

from __future__ import annotations

import json
import logging

import pytest

from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import ALICE, BOB, OPERATOR, Client, Json
from tests.conftest import Clock, seat

LEAD = seat("lead", 7)


async def board_ids(client: Client) -> list[str]:
    return [t["taskId"] for t in (await client.list_tasks())["tasks"]]


# Idempotency by envelope id.


async def test_create_task_replays_the_stored_result_for_the_same_envelope_id(
    client: Client, clock: Clock
) -> None:
    first = await client.call("create-task", OPERATOR, {"title": "once"}, envelope_id="e-1")
    clock.advance_ms(1000)
    again = await client.call("create-task", OPERATOR, {"title": "once"}, envelope_id="e-1")
    assert again == first
    assert await board_ids(client) == [first["taskId"]]
    assert await client.change_seq() == 1


async def test_an_envelope_id_reused_with_other_args_is_a_conflict(client: Client) -> None:
    first = await client.call("create-task", OPERATOR, {"title": "one"}, envelope_id="e-1")
    for command, args in (
        ("create-task", {"title": "two"}),
        ("create-task", {"title": "one", "brief": "more"}),
        ("administer-task", {"taskId": first["taskId"], "status": "dropped"}),
    ):
        await client.refused(ErrorCode.CONFLICT, command, OPERATOR, args, envelope_id="e-1")
    assert await board_ids(client) == [first["taskId"]]
    assert await client.get(first["taskId"]) == first
    assert await client.change_seq() == 1


async def test_update_task_replays_its_result_without_a_second_effect(
    client: Client, store: TaskStore, clock: Clock
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    args = {
        "taskId": task_id,
        "status": "blocked",
        "note": "waiting on review",
        "evidence": [{"kind": "review", "ref": "PR 9"}],
    }
    blocked = await client.call("update-task", ALICE, args, mode="self", envelope_id="u-1")
    seq = await client.change_seq()
    clock.advance_ms(1000)
    assert await client.call("update-task", ALICE, args, mode="self", envelope_id="u-1") == blocked
    assert await client.change_seq() == seq
    assert len(await store.history(task_id)) == 3

    # After the task moved on, a replay answers the task as it is: no second effect.
    done = await client.update(ALICE, task_id, status="done")
    assert await client.call("update-task", ALICE, args, mode="self", envelope_id="u-1") == done
    assert await client.get(task_id) == done
    assert len(done["evidence"]) == 1
    await client.refused(
        ErrorCode.CONFLICT,
        "update-task",
        ALICE,
        {**args, "status": "dropped"},
        mode="self",
        envelope_id="u-1",
    )
    assert await client.get(task_id) == done


async def test_administer_task_replay_does_not_unbind_a_second_time(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    args = {"taskId": task_id, "unbind": True, "note": "seat is gone"}
    freed = await client.call("administer-task", OPERATOR, args, envelope_id="a-1")
    assert freed["status"] == "open"
    reclaimed = await client.claim(BOB, task_id)
    seq = await client.change_seq()
    assert await client.call("administer-task", OPERATOR, args, envelope_id="a-1") == reclaimed
    assert await client.get(task_id) == reclaimed
    assert await client.change_seq() == seq
    await client.refused(
        ErrorCode.CONFLICT,
        "administer-task",
        OPERATOR,
        {"taskId": task_id, "status": "dropped"},
        envelope_id="a-1",
    )
    assert await client.get(task_id) == reclaimed


async def test_replays_survive_a_restart(board: BoardStore, board_url: str, clock: Clock) -> None:
    client = Client.over(board, clock)
    created = await client.call("create-task", OPERATOR, {"title": "durable"}, envelope_id="c-1")
    task_id = created["taskId"]
    await client.claim(ALICE, task_id)
    update_args = {"taskId": task_id, "status": "done", "note": "merged"}
    updated = await client.call("update-task", ALICE, update_args, mode="self", envelope_id="u-1")
    admin_args = {"taskId": task_id, "unbind": True}
    freed = await client.call("administer-task", OPERATOR, admin_args, envelope_id="a-1")
    seq = await client.change_seq()
    await board.close()

    reopened = await BoardStore.open(board_url)
    try:
        clock.advance_ms(60_000)
        again = Client.over(reopened, clock)
        # Each replay answers the task as the last write left it, and changes nothing.
        replay = await again.call("create-task", OPERATOR, {"title": "durable"}, envelope_id="c-1")
        assert replay == freed
        assert replay["taskId"] == created["taskId"]
        replay = await again.call("update-task", ALICE, update_args, mode="self", envelope_id="u-1")
        assert replay == freed
        assert updated["status"] == "done"
        assert await again.call("administer-task", OPERATOR, admin_args, envelope_id="a-1") == freed
        await again.refused(
            ErrorCode.CONFLICT, "create-task", OPERATOR, {"title": "other"}, envelope_id="c-1"
        )
        assert await board_ids(again) == [task_id]
        assert await again.change_seq() == seq
    finally:
        await reopened.close()


RETENTION_MS = 60_000


def retaining(store: TaskStore, clock: Clock) -> Client:
    return Client.over(store, clock, retention_ms=RETENTION_MS)


async def test_an_envelope_id_is_remembered_for_the_whole_retention_window(
    store: TaskStore, clock: Clock
) -> None:
    client = retaining(store, clock)
    first = await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1")
    clock.advance_ms(RETENTION_MS)
    assert await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1") == first
    await client.refused(
        ErrorCode.CONFLICT, "create-task", OPERATOR, {"title": "y"}, envelope_id="e-1"
    )
    assert await client.change_seq() == 1


async def test_an_envelope_id_is_forgotten_after_the_retention_window(
    store: TaskStore, clock: Clock
) -> None:
    client = retaining(store, clock)
    first = await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1")
    clock.advance_ms(RETENTION_MS + 1)
    second = await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1")
    assert second["taskId"] != first["taskId"]
    assert await client.change_seq() == 2


async def test_a_pruned_envelope_id_is_forgotten(store: TaskStore, clock: Clock) -> None:
    client = retaining(store, clock)
    first = await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1")
    clock.advance_ms(RETENTION_MS + 1)
    assert await store.prune(clock.ms - RETENTION_MS) == 1
    second = await client.call("create-task", OPERATOR, {"title": "y"}, envelope_id="e-1")
    assert second["taskId"] != first["taskId"]
    assert await board_ids(client) == [first["taskId"], second["taskId"]]
    assert await client.change_seq() == 2


async def test_the_same_envelope_id_from_two_seats_does_not_collide(client: Client) -> None:
    one = await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="e-1")
    two = await client.call("create-task", LEAD, {"title": "x"}, envelope_id="e-1")
    assert one["taskId"] != two["taskId"]
    # The same principal in a new incarnation is a different caller, too.
    reborn = seat(OPERATOR.actor, 98)
    three = await client.call("create-task", reborn, {"title": "x"}, envelope_id="e-1")
    assert len({one["taskId"], two["taskId"], three["taskId"]}) == 3

    for who, task in ((ALICE, one), (BOB, two)):
        await client.claim(who, task["taskId"])
        args = {"taskId": task["taskId"], "status": "done"}
        done = await client.call("update-task", who, args, mode="self", envelope_id="u-1")
        assert done["status"] == "done"
        assert done["binding"]["actor"] == who.actor
    assert await client.change_seq() == 7


# Idempotency by semantics.


async def test_a_repeated_claim_returns_the_same_record_and_writes_nothing(
    client: Client, store: TaskStore, clock: Clock
) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.call("claim-task", ALICE, {"taskId": task_id}, mode="self")
    seq = await client.change_seq()
    clock.advance_ms(1000)
    assert await client.claim(ALICE, task_id) == claimed
    assert await client.call("claim-task", ALICE, {"taskId": task_id}, mode="self") == claimed
    assert await client.change_seq() == seq
    assert [e.command for e in await store.history(task_id)] == ["create-task", "claim-task"]


async def test_a_repeated_bind_returns_the_same_record_and_writes_nothing(
    client: Client, clock: Clock
) -> None:
    task_id = (await client.create())["taskId"]
    bound = await client.bind(ALICE, task_id)
    seq = await client.change_seq()
    clock.advance_ms(1000)
    assert await client.bind(ALICE, task_id) == bound
    # From another binder too: the binding that holds is kept, boundBy included.
    assert await client.bind(ALICE, task_id, mode="owner", caller=LEAD) == bound
    expected = {"owner": "local", "actor": "alice", "lifecycleUid": ALICE.lifecycleUid}
    again = await client.call(
        "bind-task",
        OPERATOR,
        {"taskId": task_id, "expectedBinding": expected},
        mode="any",
        target=ALICE,
    )
    assert again == bound
    assert await client.change_seq() == seq


async def test_reissuing_a_bind_with_expected_binding_null_returns_the_same_record(
    client: Client,
) -> None:
    task_id = (await client.create())["taskId"]
    args = {"taskId": task_id, "expectedBinding": None}
    bound = await client.call("bind-task", OPERATOR, args, mode="any", target=ALICE)
    assert await client.call("bind-task", OPERATOR, args, mode="any", target=ALICE) == bound


# changeSeq


async def test_change_seq_advances_exactly_once_per_effective_write(
    client: Client, clock: Clock
) -> None:
    seqs = [await client.change_seq()]

    async def step() -> None:
        clock.advance_ms(1)
        seq = await client.change_seq()
        assert (await client.list_tasks())["changeSeq"] == seq
        seqs.append(seq)

    task_id = (await client.create())["taskId"]
    await step()
    await client.claim(ALICE, task_id)
    await step()
    await client.update(ALICE, task_id, note="a note alone is a write")
    await step()
    await client.update(ALICE, task_id, status="blocked")
    await step()
    await client.bind(BOB, task_id)
    await step()
    await client.administer(task_id, status="dropped")
    await step()
    await client.administer(task_id, unbind=True)
    await step()
    assert seqs == [0, 1, 2, 3, 4, 5, 6, 7]


async def test_change_seq_stays_put_on_replays_refusals_no_ops_and_reads(
    client: Client, store: TaskStore
) -> None:
    events: list[tuple[int, int]] = []
    task_id = (await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="c-1"))[
        "taskId"
    ]
    await client.claim(ALICE, task_id)
    note = {"taskId": task_id, "evidence": [{"kind": "run", "ref": "r-1"}]}
    await client.call("update-task", ALICE, note, mode="self", envelope_id="u-1")

    async def listener(change_seq: int, observed_at: int) -> None:
        events.append((change_seq, observed_at))

    client.service.add_listener(listener)
    seq = await client.change_seq()
    history = list(await store.history(task_id))

    # Replays.
    await client.call("create-task", OPERATOR, {"title": "x"}, envelope_id="c-1")
    await client.call("update-task", ALICE, note, mode="self", envelope_id="u-1")
    # Refusals.
    await client.refused_claim(ErrorCode.CONFLICT, BOB, task_id)
    await client.refused_update(ErrorCode.PERMISSION_DENIED, BOB, task_id)
    await client.refused(
        ErrorCode.BAD_REQUEST, "create-task", OPERATOR, {"title": "x", "status": "claimed"}
    )
    await client.refused(
        ErrorCode.CONFLICT, "create-task", OPERATOR, {"title": "y"}, envelope_id="c-1"
    )
    await client.refused_administer(ErrorCode.BAD_REQUEST, task_id)
    # No-ops: the rule returns the record unchanged.
    await client.claim(ALICE, task_id)
    await client.bind(ALICE, task_id)
    await client.update(ALICE, task_id, status="claimed")
    await client.update(ALICE, task_id, evidence=[{"kind": "run", "ref": "r-1"}])
    await client.administer(task_id, status="claimed")
    # Reads.
    await client.list_tasks()
    await client.my_tasks(ALICE)
    await client.get(task_id)

    assert await client.change_seq() == seq
    assert list(await store.history(task_id)) == history
    assert events == []


# The change listener.


async def test_the_listener_hears_each_committed_change_once(client: Client, clock: Clock) -> None:
    events: list[tuple[int, int]] = []

    async def listener(change_seq: int, observed_at: int) -> None:
        events.append((change_seq, observed_at))

    client.service.add_listener(listener)
    expected: list[tuple[int, int]] = []
    task_id = (await client.create())["taskId"]
    expected.append((1, clock.ms))
    clock.advance_ms(10)
    await client.claim(ALICE, task_id)
    expected.append((2, clock.ms))
    clock.advance_ms(10)
    await client.update(ALICE, task_id, status="done", note="merged")
    expected.append((3, clock.ms))
    assert events == expected


async def test_a_failing_listener_neither_undoes_nor_fails_the_write(
    client: Client, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[int] = []

    async def broken(change_seq: int, observed_at: int) -> None:
        raise RuntimeError("the event plane is down")

    async def healthy(change_seq: int, observed_at: int) -> None:
        heard.append(change_seq)

    client.service.add_listener(broken)
    client.service.add_listener(healthy)
    with caplog.at_level(logging.ERROR, logger="cotal_tasks.bridge.service.commands"):
        created: Json = await client.create("survives")
        await client.claim(ALICE, created["taskId"])
    assert (await client.get(created["taskId"]))["status"] == "claimed"
    assert await client.change_seq() == 2
    assert heard == [1, 2]
    failures = [r for r in caplog.records if "change listener failed" in r.getMessage()]
    assert len(failures) == 2


# History.


async def test_history_lists_each_write_in_order_with_its_caller_and_note(
    client: Client, store: TaskStore, clock: Clock
) -> None:
    task_id = (await client.create())["taskId"]
    created_at = clock.ms
    clock.advance_ms(10)
    await client.claim(ALICE, task_id)
    await client.refused_claim(ErrorCode.CONFLICT, BOB, task_id)
    clock.advance_ms(10)
    await client.update(ALICE, task_id, status="blocked", note="waiting on review")
    clock.advance_ms(10)
    await client.administer(task_id, unbind=True, note="seat is gone")

    entries = await store.history(task_id)
    assert [(e.command, e.actor, e.status, e.note, e.at) for e in entries] == [
        ("create-task", str(OPERATOR), "open", None, created_at),
        ("claim-task", str(ALICE), "claimed", None, created_at + 10),
        ("update-task", str(ALICE), "blocked", "waiting on review", created_at + 20),
        ("administer-task", str(OPERATOR), "open", "seat is gone", created_at + 30),
    ]
    assert str(ALICE) == f"local.alice/{ALICE.lifecycleUid}"
    assert {e.task_id for e in entries} == {task_id}


async def test_a_result_records_the_task_and_revision_not_a_copy_of_the_record(
    client: Client, store: TaskStore
) -> None:
    """Before: every result held the whole record (a 4 KB brief and 32 evidence refs made
    each one over 20 KB, one per note-only update). Now it names the task and the revision
    the write made; a replay reads the task."""
    evidence = [{"kind": "commit", "ref": f"{n:03d}" + "r" * 500} for n in range(32)]
    created = await client.call(
        "create-task", OPERATOR, {"title": "big", "brief": "b" * 4096}, envelope_id="c-big"
    )
    task_id = created["taskId"]
    await client.claim(ALICE, task_id)
    args = {"taskId": task_id, "note": "n" * 4096, "evidence": evidence}
    updated = await client.call("update-task", ALICE, args, mode="self", envelope_id="u-big")
    for key, revision in ((f"{OPERATOR}:c-big", 1), (f"{ALICE}:u-big", 3)):
        record = await store.recall(key, 0)
        assert record is not None
        assert json.loads(record.result) == {"taskId": task_id, "revision": revision}
    assert (
        await client.call("update-task", ALICE, args, mode="self", envelope_id="u-big") == updated
    )
