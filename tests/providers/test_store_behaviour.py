"""The store port's behaviour, run against every store: SQLite and PostgreSQL boards."""

from __future__ import annotations

import asyncio

import pytest

from cotal_tasks.core import (
    ContractError,
    CreateTaskInput,
    ErrorCode,
    Task,
    claim_task,
    create_task,
)
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import (
    IdempotencyKey,
    IdempotencyKeyTaken,
    PageQuery,
    RevisionConflict,
    Write,
)
from tests.conftest import seat

NOW = 1_780_000_000_000


def new_task(n: int, *, status: str = "open") -> Task:
    args = CreateTaskInput.model_validate({"title": f"task {n}", "status": status})
    return create_task(args, task_id=f"t-{n:05d}", space="demo", now=NOW + n)


async def put(store: BoardStore, task: Task, idempotency: IdempotencyKey | None = None) -> int:
    write = Write(task, None, "create-task", "local.op/x", idempotency=idempotency)
    return (await store.commit(write)).change_seq


async def test_absent_task_is_not_found(board: BoardStore) -> None:
    with pytest.raises(ContractError) as caught:
        await board.get("t-nope")
    assert caught.value.code is ErrorCode.NOT_FOUND
    assert "t-nope" in caught.value.message


async def test_create_then_get_round_trips_the_record(board: BoardStore) -> None:
    task = new_task(1)
    assert await put(board, task) == 1
    stored = await board.get(task.taskId)
    assert stored.task == task
    assert stored.revision == 1
    assert await board.change_seq() == 1


async def test_creating_an_existing_id_conflicts_and_changes_nothing(board: BoardStore) -> None:
    await put(board, new_task(1))
    with pytest.raises(RevisionConflict):
        await put(board, new_task(1, status="done"))
    assert (await board.get("t-00001")).task.status == "open"
    assert await board.change_seq() == 1


async def test_compare_and_swap_refuses_a_stale_revision(board: BoardStore) -> None:
    task = new_task(1)
    await put(board, task)
    claimed = claim_task(task, seat("alice", 1), environment=None, now=NOW + 10)
    committed = await board.commit(Write(claimed, 1, "claim-task", "local.alice/1"))
    assert committed.revision == 2
    assert committed.change_seq == 2
    other = claim_task(task, seat("bob", 2), environment=None, now=NOW + 11)
    with pytest.raises(RevisionConflict):
        await board.commit(Write(other, 1, "claim-task", "local.bob/2"))
    stored = await board.get(task.taskId)
    assert stored.task == claimed
    assert stored.revision == 2
    assert await board.change_seq() == 2


async def test_keyset_pages_return_every_task_once_in_order(board: BoardStore) -> None:
    for n in range(25):
        await put(board, new_task(n))
    seen: list[str] = []
    after: int | None = None
    pages = 0
    while True:
        page = await board.page(PageQuery(limit=10, after=after))
        pages += 1
        seen.extend(t.taskId for t in page.tasks)
        if not page.more:
            break
        after = page.last
    assert pages == 3
    assert seen == [f"t-{n:05d}" for n in range(25)]


async def test_an_exactly_full_last_page_says_no_more(board: BoardStore) -> None:
    for n in range(10):
        await put(board, new_task(n))
    page = await board.page(PageQuery(limit=10))
    assert len(page.tasks) == 10
    assert page.more is False


async def test_status_and_bound_seat_filters(board: BoardStore) -> None:
    alice = seat("alice", 1)
    for n in range(6):
        task = new_task(n, status="done" if n % 3 == 0 else "open")
        await put(board, task)
        if n in (1, 4):
            claimed = claim_task(task, alice, environment=None, now=NOW + 100)
            await board.commit(Write(claimed, 1, "claim-task", str(alice)))
    done = await board.page(PageQuery(limit=50, statuses=frozenset({"done"})))
    assert [t.taskId for t in done.tasks] == ["t-00000", "t-00003"]
    mixed = await board.page(PageQuery(limit=50, statuses=frozenset({"done", "claimed"})))
    assert [t.taskId for t in mixed.tasks] == ["t-00000", "t-00001", "t-00003", "t-00004"]
    mine = await board.page(PageQuery(limit=50, bound_to=alice))
    assert [t.taskId for t in mine.tasks] == ["t-00001", "t-00004"]
    new_incarnation = await board.page(PageQuery(limit=50, bound_to=seat("alice", 2)))
    assert list(new_incarnation.tasks) == []


async def test_pages_carry_summaries_without_brief_or_evidence(board: BoardStore) -> None:
    args = CreateTaskInput.model_validate(
        {"title": "with brief", "brief": "long text", "evidence": [{"kind": "run", "ref": "r1"}]}
    )
    await put(board, create_task(args, task_id="t-brief", space="demo", now=NOW))
    summary = (await board.page(PageQuery(limit=5))).tasks[0].to_json()
    assert "brief" not in summary
    assert "evidence" not in summary
    assert summary["title"] == "with brief"


DIGEST = "sha256:" + "0" * 64


def remembered(key: str) -> IdempotencyKey:
    return IdempotencyKey(key, "create-task", DIGEST)


async def test_idempotency_result_is_recorded_with_the_write(board: BoardStore) -> None:
    await put(board, new_task(1), idempotency=remembered("k1"))
    record = await board.recall("k1", not_before=0)
    assert record is not None
    assert (record.key, record.command, record.args_digest) == ("k1", "create-task", DIGEST)
    assert Task.model_validate_json(record.result) == new_task(1)
    assert await board.recall("k2", not_before=0) is None


async def test_a_taken_idempotency_key_rolls_the_whole_write_back(board: BoardStore) -> None:
    await put(board, new_task(1), idempotency=remembered("k1"))
    with pytest.raises(IdempotencyKeyTaken):
        await put(board, new_task(2), idempotency=remembered("k1"))
    with pytest.raises(ContractError):
        await board.get("t-00002")
    assert await board.change_seq() == 1
    assert list(await board.history("t-00002")) == []


async def test_idempotency_results_expire_and_prune(board: BoardStore) -> None:
    await put(board, new_task(1), idempotency=remembered("old"))
    created_at = new_task(1).updatedAt
    assert await board.recall("old", not_before=created_at + 1) is None
    assert await board.recall("old", not_before=created_at) is not None
    assert await board.prune(before=created_at + 1) == 1
    assert await board.recall("old", not_before=0) is None


async def test_history_is_append_only_and_ordered(board: BoardStore) -> None:
    task = new_task(1)
    await put(board, task)
    claimed = claim_task(task, seat("alice", 1), environment=None, now=NOW + 5)
    await board.commit(Write(claimed, 1, "claim-task", "local.alice/1", note="taking it"))
    entries = list(await board.history(task.taskId))
    assert [(e.command, e.status, e.note) for e in entries] == [
        ("create-task", "open", None),
        ("claim-task", "claimed", "taking it"),
    ]
    assert entries[1].actor == "local.alice/1"


async def test_change_seq_and_records_survive_a_reopen(board_url: str) -> None:
    first = await BoardStore.open(board_url)
    await put(first, new_task(1))
    await put(first, new_task(2))
    await first.close()
    second = await BoardStore.open(board_url)
    try:
        assert await second.change_seq() == 2
        assert (await second.get("t-00002")).task == new_task(2)
    finally:
        await second.close()


async def test_concurrent_swaps_on_one_revision_have_exactly_one_winner(board: BoardStore) -> None:
    task = new_task(1)
    await put(board, task)

    async def attempt(n: int) -> bool:
        claimed = claim_task(task, seat(f"s{n}", n), environment=None, now=NOW + n)
        try:
            await board.commit(Write(claimed, 1, "claim-task", f"local.s{n}"))
        except RevisionConflict:
            return False
        return True

    results = await asyncio.gather(*(attempt(n) for n in range(20)))
    assert results.count(True) == 1
    assert await board.change_seq() == 2
    assert (await board.get(task.taskId)).revision == 2


async def test_the_board_is_always_fresh(board: BoardStore) -> None:
    assert await board.freshness() is None
