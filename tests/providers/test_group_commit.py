"""Group commit on the board: writes that arrive together share a transaction, each keeps
its compare-and-swap, history row, idempotency result, ``changeSeq`` and answer, and a
refused write never fails its neighbours. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from cotal_tasks.core import Seat, claim_task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.board import postgres as pg_hot
from cotal_tasks.providers.board import sqlite as sqlite_hot
from cotal_tasks.providers.store import (
    Committed,
    IdempotencyKey,
    IdempotencyKeyTaken,
    RevisionConflict,
    Write,
)
from tests.providers.conftest import NOW, new_task

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many calls each transaction carried (the real commit runs unchanged)."""
    sizes: list[int] = []
    commit_batch = sqlite_hot._commit_batch
    run = pg_hot.PostgresBoard._run

    def sqlite_spy(conn: Any, batch: list[Any]) -> Any:
        sizes.append(len(batch))
        return commit_batch(conn, batch)

    async def pg_spy(self: pg_hot.PostgresBoard, batch: list[Any]) -> Any:
        sizes.append(len(batch))
        return await run(self, batch)

    monkeypatch.setattr(sqlite_hot, "_commit_batch", sqlite_spy)
    monkeypatch.setattr(pg_hot.PostgresBoard, "_run", pg_spy)
    return sizes


def seat(n: int) -> Seat:
    return Seat("local", f"s{n}", f"{n:026d}")


async def test_concurrent_writes_share_transactions_and_a_refusal_fails_only_itself(
    board: BoardStore, batch_sizes: list[int]
) -> None:
    tasks = [new_task(n) for n in range(30)]
    await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
    await board.commit(  # an idempotency key the storm will try to take again
        Write(
            claim_task(tasks[29], seat(29), environment=None, now=NOW + 100),
            1,
            "claim-task",
            "local.s29",
            idempotency=IdempotencyKey("taken", "claim-task", "sha256:x"),
        )
    )
    before = await board.change_seq()
    batch_sizes.clear()

    def claim(n: int, expected: int, key: str | None = None) -> Write:
        task = claim_task(tasks[n], seat(n), environment=None, now=NOW + 200 + n)
        idempotency = None if key is None else IdempotencyKey(key, "claim-task", "sha256:y")
        return Write(task, expected, "claim-task", f"local.s{n}", idempotency=idempotency)

    writes = [claim(n, 1, key=f"k{n}") for n in range(20)]  # fine
    writes += [claim(n, 7) for n in range(20, 25)]  # stale revision: a conflict
    writes += [claim(n, 1, key="taken") for n in range(25, 29)]  # the key is taken
    outcomes: list[Any] = await asyncio.gather(
        *(board.commit(w) for w in writes), return_exceptions=True
    )

    assert len(batch_sizes) < len(writes), batch_sizes  # they shared transactions
    fine = outcomes[:20]
    assert all(isinstance(o, Committed) for o in fine), fine
    assert sorted(o.change_seq for o in fine) == list(range(before + 1, before + 21))
    assert [o.revision for o in fine] == [2] * 20
    assert all(isinstance(o, RevisionConflict) for o in outcomes[20:25])
    assert all(isinstance(o, IdempotencyKeyTaken) for o in outcomes[25:29])
    assert await board.change_seq() == before + 20
    for n in range(29):  # each kept its own record, history and idempotency result
        stored = await board.get(tasks[n].taskId)
        history = await board.history(tasks[n].taskId)
        if n < 20:
            assert stored.revision == 2
            assert stored.task.status == "claimed"
            assert [h.command for h in history] == ["create-task", "claim-task"]
            recalled = await board.recall(f"k{n}", 0)
            assert recalled is not None
            assert recalled.command == "claim-task"
        else:
            assert stored.revision == 1
            assert stored.task.status == "open"
            assert [h.command for h in history] == ["create-task"]
    taken = await board.recall("taken", 0)
    assert taken is not None
    assert taken.args_digest == "sha256:x"


async def test_a_batch_where_every_write_is_refused_changes_nothing(board: BoardStore) -> None:
    task = new_task(1)
    await board.commit(Write(task, None, "create-task", "local.op/x"))
    before = await board.change_seq()
    stale = claim_task(task, seat(1), environment=None, now=NOW + 5)
    outcomes = await asyncio.gather(
        *(board.commit(Write(stale, 9, "claim-task", "local.s1")) for _ in range(5)),
        return_exceptions=True,
    )
    assert all(isinstance(o, RevisionConflict) for o in outcomes)
    assert await board.change_seq() == before
    assert (await board.get(task.taskId)).revision == 1


@pytest.fixture
def sqlite_board(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'statements.db'}"


async def test_a_lone_write_is_its_own_statements_and_a_refused_one_leaves_nothing(
    sqlite_board: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    connect = sqlite_hot.connect

    def traced(path: str) -> Any:
        conn = connect(path)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite_hot, "connect", traced)
    board = await BoardStore.open(sqlite_board)
    try:
        task = new_task(1)
        await board.commit(Write(task, None, "create-task", "local.op/x"))
        claimed = claim_task(task, seat(1), environment=None, now=NOW + 5)
        key = IdempotencyKey("k1", "claim-task", "sha256:y")
        statements.clear()
        with pytest.raises(RevisionConflict):  # stale: its result must not stay behind
            await board.commit(Write(claimed, 9, "claim-task", "local.s1", idempotency=key))
        assert await board.recall("k1", 0) is None
        assert not any("SAVEPOINT" in s for s in statements), statements
        statements.clear()
        committed = await board.commit(Write(claimed, 1, "claim-task", "local.s1", idempotency=key))
        writer = [s for s in statements if not s.startswith("SELECT")]
        # BEGIN, the result, the swap, the history row, changeSeq, COMMIT: no savepoint
        assert len(writer) == 6, writer
        assert committed.revision == 2
        recalled = await board.recall("k1", 0)
        assert recalled is not None
        assert recalled.args_digest == "sha256:y"
    finally:
        await board.close()


async def test_an_expired_result_gives_its_envelope_id_to_the_next_write(
    board: BoardStore,
) -> None:
    tasks = [new_task(n) for n in range(2)]
    await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
    first = claim_task(tasks[0], seat(1), environment=None, now=NOW + 5)
    await board.commit(
        Write(
            first, 1, "claim-task", "local.s1", idempotency=IdempotencyKey("k", "claim-task", "a")
        )
    )
    second = claim_task(tasks[1], seat(1), environment=None, now=NOW + 10)
    live = IdempotencyKey("k", "claim-task", "b", expired_before=NOW)
    with pytest.raises(IdempotencyKeyTaken):  # not expired yet
        await board.commit(Write(second, 1, "claim-task", "local.s1", idempotency=live))
    expired = IdempotencyKey("k", "claim-task", "b", expired_before=NOW + 6)
    await board.commit(Write(second, 1, "claim-task", "local.s1", idempotency=expired))
    recalled = await board.recall("k", 0)
    assert recalled is not None
    assert recalled.args_digest == "b"


def _let_the_writer_run() -> None:
    """What a request does on the loop before its commit, here a blocking call that lets
    the writer thread run (a point read releases the GIL too)."""
    time.sleep(0.002)


async def test_writes_of_one_turn_share_one_transaction_with_an_idle_writer(
    sqlite_board: str, batch_sizes: list[int]
) -> None:
    board = await BoardStore.open(sqlite_board)
    try:
        tasks = [new_task(n) for n in range(12)]
        await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
        for _ in range(3):  # the writer idles between rounds: each round is one turn's
            batch_sizes.clear()
            claims = [
                claim_task(t, seat(n), environment=None, now=NOW + 5) for n, t in enumerate(tasks)
            ]
            current = {t.taskId: (await board.get(t.taskId)).revision for t in tasks}

            async def claim(n: int, task: Any, revisions: dict[str, int] = current) -> Committed:
                _let_the_writer_run()
                return await board.commit(
                    Write(task, revisions[task.taskId], "claim-task", f"local.s{n}")
                )

            await asyncio.gather(*(claim(n, c) for n, c in enumerate(claims)))
            assert batch_sizes == [12]
            tasks = claims
    finally:
        await board.close()


class _CountingConnection:
    """An asyncpg connection that counts the statements a write sends."""

    def __init__(self, conn: Any, sent: list[str]) -> None:
        self._conn = conn
        self._sent = sent

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.fetchval(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.fetchrow(sql, *args)

    async def execute(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.execute(sql, *args)


async def test_a_postgres_update_with_its_result_is_one_round_trip(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    write_one = pg_hot._write

    async def counting(conn: Any, write: Write, row: Any) -> int:
        return await write_one(_CountingConnection(conn, sent), write, row)

    monkeypatch.setattr(pg_hot, "_write", counting)
    board = await BoardStore.open(postgres_database)
    try:
        tasks = [new_task(n) for n in range(2)]
        await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
        claimed = claim_task(tasks[0], seat(1), environment=None, now=NOW + 5)
        key = IdempotencyKey("k1", "claim-task", "sha256:y")
        sent.clear()
        committed = await board.commit(Write(claimed, 1, "claim-task", "local.s1", idempotency=key))
        assert len(sent) == 1, sent
        assert committed.revision == 2
        history = await board.history(claimed.taskId)
        assert [h.command for h in history] == ["create-task", "claim-task"]
        recalled = await board.recall("k1", 0)
        assert recalled is not None
        # a stale swap leaves neither its row, its history nor its result
        other = claim_task(tasks[1], seat(2), environment=None, now=NOW + 6)
        stale = IdempotencyKey("k2", "claim-task", "sha256:z")
        with pytest.raises(RevisionConflict):
            await board.commit(Write(other, 9, "claim-task", "local.s2", idempotency=stale))
        assert await board.recall("k2", 0) is None
        assert [h.command for h in await board.history(other.taskId)] == ["create-task"]
        # and a taken id changes nothing
        with pytest.raises(IdempotencyKeyTaken):
            await board.commit(Write(other, 1, "claim-task", "local.s2", idempotency=key))
        assert (await board.get(other.taskId)).revision == 1
        assert [h.command for h in await board.history(other.taskId)] == ["create-task"]
        # the result is dated by the write, as the retention window reads it
        assert await board.prune(before=claimed.updatedAt) == 0
        assert await board.prune(before=claimed.updatedAt + 1) == 1
    finally:
        await board.close()
