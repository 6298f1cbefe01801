"""The store port's behaviour, run against every store: the in-memory store, the SQLite and
PostgreSQL boards, and the hosted stores of GitHub, GitLab, Jira and Linear (a mirror plus
the fake tracker, in-process), and of a GitHub endpoint over two repositories.

Each test gets a ``StoreHarness`` (``tests/providers/conftest.py``). Where a hosted store
behaves differently by design, the test says so and asserts the hosted variant:

- A hosted store assigns the id of a task it creates (the tracker numbers the issue) and
  takes the tracker's timestamps and ``statusSource`` from its answer, so a created record
  is compared field by field with what was asked, and ids come from ``harness.create``.
- "Creating an existing id conflicts" cannot happen on a hosted store: the id a caller's
  record carries is not the id the store gives it, so the tracker numbers a new issue.
- A hosted store is fresh only once a sync has succeeded (reads before that carry
  ``stale``); a board is always fresh.
"""

from __future__ import annotations

import asyncio
import json

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
    HistoryPage,
    HistoryQuery,
    IdempotencyKey,
    IdempotencyKeyTaken,
    PageQuery,
    RevisionConflict,
    Write,
)
from tests.conftest import seat
from tests.providers.conftest import NOW, StoreHarness, new_task

# The label a hosted store's tracker carries for a claimed task (Jira's: the workflow
# status it moves the issue to), which becomes the record's statusSource when the
# tracker reads it back.
CLAIMED_SOURCE = {
    "github": "in-progress",
    "github-sources": "in-progress",
    "gitlab": "workflow::in progress",
    "jira": "In Progress",
    "linear": "In Progress",
    "linear-teams": "In Progress",
}
# What a record asked for, as opposed to what a hosted store fills in from its tracker
# (the id, the timestamps, statusSource).
ASKED = {"version", "space", "title", "brief", "status", "binding", "evidence"}


def as_read_back(harness: StoreHarness, claimed: Task) -> Task:
    """``claimed`` as the store holds it: on a hosted store, with the tracker's label as
    statusSource (the board keeps the record exactly)."""
    if not harness.hosted:
        return claimed
    return Task.model_validate(
        {**claimed.model_dump(), "statusSource": CLAIMED_SOURCE[harness.kind]}
    )


async def test_absent_task_is_not_found(harness: StoreHarness) -> None:
    with pytest.raises(ContractError) as caught:
        await harness.store.get("t-nope")
    assert caught.value.code is ErrorCode.NOT_FOUND
    assert "t-nope" in caught.value.message
    if harness.hosted:
        # A well-formed reference of an issue that does not exist is not found either.
        with pytest.raises(ContractError) as absent:
            await harness.store.get(harness.next_hosted_id())
        assert absent.value.code is ErrorCode.NOT_FOUND


async def test_create_then_get_round_trips_the_record(harness: StoreHarness) -> None:
    store = harness.store
    task = new_task(1)
    committed = await harness.commit_new(task)
    assert committed.change_seq == 1
    stored = await store.get(committed.task.taskId)
    assert stored.task == committed.task
    if harness.hosted:
        # The tracker numbered the issue and stamped it; everything asked is kept.
        assert committed.task.taskId != task.taskId
        assert stored.task.model_dump(include=ASKED) == task.model_dump(include=ASKED)
        assert harness.tracker_issues() == 1
    else:
        assert stored.task == task
    assert stored.revision == 1
    assert await store.change_seq() == 1


async def test_creating_an_existing_id_conflicts_and_changes_nothing(
    harness: StoreHarness,
) -> None:
    store = harness.store
    first = await harness.create(1)
    if not harness.hosted:
        assert first == "t-00001"
        with pytest.raises(RevisionConflict):
            await harness.commit_new(new_task(1, status="done"))
        assert (await store.get("t-00001")).task.status == "open"
        assert await store.change_seq() == 1
        return
    # Hosted: a created record's id is the tracker's to give, so a record carrying an
    # existing task's id is a new issue, numbered by the tracker; the existing task is
    # not touched.
    again = Task.model_validate({**new_task(1, status="done").model_dump(), "taskId": first})
    committed = await harness.commit_new(again)
    assert committed.task.taskId != first
    assert committed.task.status == "done"
    assert (await store.get(first)).task.status == "open"
    assert (await store.get(first)).revision == 1
    assert await store.change_seq() == 2
    assert harness.tracker_issues() == 2


async def test_compare_and_swap_refuses_a_stale_revision(harness: StoreHarness) -> None:
    store = harness.store
    task_id = await harness.create(1)
    task = (await store.get(task_id)).task
    claimed = claim_task(task, seat("alice", 1), environment=None, now=NOW + 10)
    committed = await store.commit(Write(claimed, 1, "claim-task", "local.alice/1"))
    assert committed.revision == 2
    assert committed.change_seq == 2
    writes = harness.tracker_writes()
    other = claim_task(task, seat("bob", 2), environment=None, now=NOW + 11)
    with pytest.raises(RevisionConflict):
        await store.commit(Write(other, 1, "claim-task", "local.bob/2"))
    assert harness.tracker_writes() == writes  # refused before anything reached a tracker
    stored = await store.get(task_id)
    assert stored.task == as_read_back(harness, claimed)
    assert stored.task == committed.task
    assert stored.revision == 2
    assert await store.change_seq() == 2


async def test_keyset_pages_return_every_task_once_in_order(harness: StoreHarness) -> None:
    ids = [await harness.create(n) for n in range(25)]
    if not harness.hosted:
        assert ids == [f"t-{n:05d}" for n in range(25)]
    seen: list[str] = []
    after: int | None = None
    pages = 0
    while True:
        page = await harness.store.page(PageQuery(limit=10, after=after))
        pages += 1
        seen.extend(t.taskId for t in page.tasks)
        if not page.more:
            break
        after = page.last
    assert pages == 3
    assert seen == ids


async def test_an_exactly_full_last_page_says_no_more(harness: StoreHarness) -> None:
    for n in range(10):
        await harness.create(n)
    page = await harness.store.page(PageQuery(limit=10))
    assert len(page.tasks) == 10
    assert page.more is False


async def test_status_and_bound_seat_filters(harness: StoreHarness) -> None:
    store = harness.store
    alice = seat("alice", 1)
    for n in range(6):
        task_id = await harness.create(n, status="done" if n % 3 == 0 else "open")
        if n in (1, 4):
            task = (await store.get(task_id)).task
            claimed = claim_task(task, alice, environment=None, now=NOW + 100)
            await store.commit(Write(claimed, 1, "claim-task", str(alice)))
    i = harness.id_of
    if not harness.hosted:
        assert [i(n) for n in range(6)] == [f"t-{n:05d}" for n in range(6)]
    done = await store.page(PageQuery(limit=50, statuses=frozenset({"done"})))
    assert [t.taskId for t in done.tasks] == [i(0), i(3)]
    mixed = await store.page(PageQuery(limit=50, statuses=frozenset({"done", "claimed"})))
    assert [t.taskId for t in mixed.tasks] == [i(0), i(1), i(3), i(4)]
    mine = await store.page(PageQuery(limit=50, bound_to=alice))
    assert [t.taskId for t in mine.tasks] == [i(1), i(4)]
    new_incarnation = await store.page(PageQuery(limit=50, bound_to=seat("alice", 2)))
    assert list(new_incarnation.tasks) == []


async def test_pages_carry_summaries_without_brief_or_evidence(harness: StoreHarness) -> None:
    args = CreateTaskInput.model_validate(
        {"title": "with brief", "brief": "long text", "evidence": [{"kind": "run", "ref": "r1"}]}
    )
    committed = await harness.commit_new(
        create_task(args, task_id="t-brief", space="demo", now=NOW)
    )
    assert committed.task.brief == "long text"
    assert [(e.kind, e.ref) for e in committed.task.evidence] == [("run", "r1")]
    summary = (await harness.store.page(PageQuery(limit=5))).tasks[0].to_json()
    assert "brief" not in summary
    assert "evidence" not in summary
    assert summary["title"] == "with brief"


async def test_a_page_of_records_carries_each_full_record_in_page_order(
    harness: StoreHarness,
) -> None:
    store = harness.store
    args = CreateTaskInput.model_validate(
        {"title": "with brief", "brief": "long text", "evidence": [{"kind": "run", "ref": "r1"}]}
    )
    await harness.commit_new(create_task(args, task_id="t-brief", space="demo", now=NOW))
    for n in range(1, 6):
        await harness.create(n, status="done" if n % 2 == 0 else "open")
    query = PageQuery(limit=2, statuses=frozenset({"open"}))
    summaries = await store.page(query)
    records = await store.page_records(query)
    assert [t.taskId for t in records.tasks] == [t.taskId for t in summaries.tasks]
    assert (records.last, records.more) == (summaries.last, summaries.more)
    for task in records.tasks:
        assert task == (await store.get(task.taskId)).task  # brief and evidence included
    assert records.tasks[0].brief == "long text"
    assert [(e.kind, e.ref) for e in records.tasks[0].evidence] == [("run", "r1")]
    rest = await store.page_records(PageQuery(limit=2, after=records.last, statuses=query.statuses))
    assert [t.status for t in rest.tasks] == ["open", "open"]
    assert rest.more is False
    if isinstance(store, BoardStore):  # the board's fast JSON reads answer the same
        as_json = await store.page_records_json(query)
        assert list(as_json.tasks) == [t.to_json() for t in records.tasks]
        assert (as_json.last, as_json.more) == (records.last, records.more)


async def test_sync_state_is_none_on_a_board_and_reports_a_mirrors_sync(
    harness: StoreHarness,
) -> None:
    state = await harness.store.sync_state()
    if not harness.hosted:
        assert state is None
        return
    assert state is not None
    await harness.sync()
    synced = await harness.store.sync_state()
    assert synced is not None
    assert synced.last_success_ms is not None
    assert synced.failing is None
    # Over several sources, each one's own state is shown beside the endpoint's.
    sources = harness.hosted_parts.sources if harness.hosted_parts else []
    shown = [(s.source, s.last_success_ms is not None) for s in synced.sources]
    assert shown == ([(s.path, True) for s in sources] if len(sources) > 1 else [])


DIGEST = "sha256:" + "0" * 64


def remembered(key: str) -> IdempotencyKey:
    return IdempotencyKey(key, "create-task", DIGEST)


async def test_idempotency_result_is_recorded_with_the_write(harness: StoreHarness) -> None:
    store = harness.store
    committed = await harness.commit_new(new_task(1), idempotency=remembered("k1"))
    record = await store.recall("k1", not_before=0)
    assert record is not None
    assert (record.key, record.command, record.args_digest) == ("k1", "create-task", DIGEST)
    # The result names the task the write made and its revision, not a copy of the record
    # (on a hosted store, with the id it assigned).
    assert json.loads(record.result) == {"taskId": committed.task.taskId, "revision": 1}
    if not harness.hosted:
        assert committed.task == new_task(1)
    assert await store.recall("k2", not_before=0) is None


async def test_a_taken_idempotency_key_rolls_the_whole_write_back(harness: StoreHarness) -> None:
    store = harness.store
    await harness.create(1, idempotency=remembered("k1"))
    writes, issues = harness.tracker_writes(), harness.tracker_issues()
    # The id the second task would have had: its own on a board, the tracker's next one
    # on a hosted store.
    absent = harness.next_hosted_id() if harness.hosted else "t-00002"
    with pytest.raises(IdempotencyKeyTaken):
        await harness.commit_new(new_task(2), idempotency=remembered("k1"))
    with pytest.raises(ContractError):
        await store.get(absent)
    assert await store.change_seq() == 1
    assert list(await store.history(absent)) == []
    # A hosted store checks the key before it writes to its tracker: no issue was made.
    assert (harness.tracker_writes(), harness.tracker_issues()) == (writes, issues)


async def test_idempotency_results_expire_and_prune(harness: StoreHarness) -> None:
    store = harness.store
    task_id = await harness.create(1, idempotency=remembered("old"))
    created_at = (await store.get(task_id)).task.updatedAt
    if not harness.hosted:
        assert created_at == new_task(1).updatedAt
    assert await store.recall("old", not_before=created_at + 1) is None
    assert await store.recall("old", not_before=created_at) is not None
    assert await store.prune(before=created_at + 1) == 1
    assert await store.recall("old", not_before=0) is None


async def test_history_is_append_only_and_ordered(harness: StoreHarness) -> None:
    store = harness.store
    task_id = await harness.create(1)
    task = (await store.get(task_id)).task
    claimed = claim_task(task, seat("alice", 1), environment=None, now=NOW + 5)
    await store.commit(Write(claimed, 1, "claim-task", "local.alice/1", note="taking it"))
    entries = list(await store.history(task_id))
    assert [(e.command, e.status, e.note) for e in entries] == [
        ("create-task", "open", None),
        ("claim-task", "claimed", "taking it"),
    ]
    assert entries[1].actor == "local.alice/1"


async def test_history_pages_by_position_for_one_task_or_the_endpoint(
    harness: StoreHarness,
) -> None:
    store = harness.store
    first, second = await harness.create(1), await harness.create(2)
    task = (await store.get(first)).task
    claimed = claim_task(task, seat("alice", 1), environment=None, now=NOW + 5)
    await store.commit(Write(claimed, 1, "claim-task", "local.alice/1", note="taking it"))

    whole = await store.history_page(HistoryQuery(limit=2))
    assert [(e.task_id, e.command) for e in whole.entries] == [
        (first, "create-task"),
        (second, "create-task"),
    ]
    assert whole.more
    assert whole.last is not None
    rest = await store.history_page(HistoryQuery(limit=2, after=whole.last))
    assert [(e.task_id, e.command, e.note) for e in rest.entries] == [
        (first, "claim-task", "taking it")
    ]
    assert not rest.more
    assert rest.last is not None
    # Past the end: nothing yet, and the position to follow from stays where it was.
    assert await store.history_page(HistoryQuery(limit=2, after=rest.last)) == HistoryPage(
        [], rest.last, False
    )

    one = await store.history_page(HistoryQuery(limit=10, task_id=first))
    assert [e.status for e in one.entries] == ["open", "claimed"]
    assert list(one.entries) == list(await store.history(first))
    assert (await store.history_page(HistoryQuery(limit=10, task_id="absent"))).entries == []


async def test_change_seq_and_records_survive_a_reopen(harness: StoreHarness) -> None:
    await harness.create(1)
    second = await harness.create(2)
    record = (await harness.store.get(second)).task
    if not harness.hosted:
        assert record == new_task(2)
    reopened = await harness.reopen()
    assert await reopened.change_seq() == 2
    assert (await reopened.get(second)).task == record


async def test_concurrent_swaps_on_one_revision_have_exactly_one_winner(
    harness: StoreHarness,
) -> None:
    store = harness.store
    task_id = await harness.create(1)
    task = (await store.get(task_id)).task
    writes = harness.tracker_writes()

    async def attempt(n: int) -> bool:
        claimed = claim_task(task, seat(f"s{n}", n), environment=None, now=NOW + n)
        try:
            await store.commit(Write(claimed, 1, "claim-task", f"local.s{n}"))
        except RevisionConflict:
            return False
        return True

    results = await asyncio.gather(*(attempt(n) for n in range(20)))
    assert results.count(True) == 1
    assert await store.change_seq() == 2
    assert (await store.get(task_id)).revision == 2
    if harness.hosted:
        assert harness.tracker_writes() == writes + 1  # only the winner wrote to the tracker


async def test_the_board_is_always_fresh(harness: StoreHarness) -> None:
    if not harness.hosted:
        assert await harness.store.freshness() is None
        return
    # Hosted: fresh only once a sync has succeeded; until then reads carry ``stale``.
    stale = await harness.store.freshness()
    assert stale is not None
    assert stale.staleAsOf == 0
    assert "first" in stale.reason
    await harness.sync()
    assert await harness.store.freshness() is None
