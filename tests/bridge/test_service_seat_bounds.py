"""Per-seat bounds: a seat's own writes are rate-bounded, its notes size-bounded, and the
history it leaves is pruned past its retention.

Before: 2,000 note-only ``update-task`` calls with 4 KB notes from one ``tasks.self`` seat in
21 s were all written (+2,002 history rows kept for ever). Now the seat gets
``writes_per_minute_per_seat`` writes (a bucket refilled at that rate), then
``resource-exhausted`` with ``not-executed`` naming the bound and the wait, and nothing of a
refused write lands.
"""

from __future__ import annotations

from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import ALICE, BOB, Client
from tests.conftest import Clock

NOTE = "n" * 4000


async def test_a_seat_past_its_write_rate_is_refused_and_nothing_lands(
    client: Client, store: TaskStore, clock: Clock
) -> None:
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)  # the seat's first write of the minute
    seq = await client.change_seq()
    for _ in range(119):  # the rest of its 120, all in the same millisecond
        await client.update(ALICE, task_id, note=NOTE)
    refused = await client.refused_update(ErrorCode.RESOURCE_EXHAUSTED, ALICE, task_id, note=NOTE)
    assert "120 writes a minute (writes_per_minute_per_seat)" in refused.message
    assert refused.outcome == "not-executed"
    assert "Send it again in 0.5 s" in refused.message
    history = await store.history(task_id, limit=1000)
    assert len(history) == 1 + 120  # create-task, then the seat's 120 writes: no more
    assert await client.change_seq() <= seq + 119  # the refused write changed nothing

    # Another seat is not held back by this one; the seat itself refills at the rate.
    other = (await client.create())["taskId"]
    await client.claim(BOB, other)
    clock.advance_ms(30_000)
    for _ in range(60):
        await client.update(ALICE, task_id, note="later")
    await client.refused_update(ErrorCode.RESOURCE_EXHAUSTED, ALICE, task_id, note="later")


async def test_a_note_over_the_endpoint_bound_is_refused_before_it_is_written(
    store: TaskStore, clock: Clock
) -> None:
    client = Client.over(store, clock, note_max_bytes=256)
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    before = await client.get(task_id)
    refused = await client.refused_update(ErrorCode.RESOURCE_EXHAUSTED, ALICE, task_id, note=NOTE)
    assert "4000 bytes, over this endpoint's bound of 256 bytes" in refused.message
    assert "note_max_bytes" in refused.message
    assert await client.get(task_id) == before
    assert len(await store.history(task_id)) == 2
    await client.update(ALICE, task_id, note="n" * 256)  # at the bound: written


async def test_history_past_its_retention_is_pruned(store: TaskStore, clock: Clock) -> None:
    day = 86_400_000
    client = Client.over(store, clock, history_retention_ms=30 * day)
    old = (await client.create("old"))["taskId"]
    clock.advance_ms(31 * day)
    new = (await client.create("new"))["taskId"]  # a write prunes, now and then
    assert await store.history(old) == []
    assert [e.command for e in await store.history(new)] == ["create-task"]
    assert (await client.get(old))["title"] == "old"  # the task itself stays
