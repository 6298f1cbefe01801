"""Group commit on the board: writes that arrive together share a transaction, each keeps
its compare-and-swap, history row, idempotency result, ``changeSeq`` and answer, and a
refused write never fails its neighbours. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

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


class _CountingTransaction:
    def __init__(self, transaction: Any, sent: list[str]) -> None:
        self._transaction = transaction
        self._sent = sent

    async def start(self) -> None:
        self._sent.append("BEGIN")
        await self._transaction.start()

    async def commit(self) -> None:
        self._sent.append("COMMIT")
        await self._transaction.commit()

    async def rollback(self) -> None:
        self._sent.append("ROLLBACK")
        await self._transaction.rollback()


class _CountingConnection:
    """An asyncpg connection that notes every statement (and BEGIN, COMMIT) it sends."""

    def __init__(self, conn: Any, sent: list[str]) -> None:
        self._conn = conn
        self._sent = sent

    def transaction(self) -> _CountingTransaction:
        return _CountingTransaction(self._conn.transaction(), self._sent)

    async def fetch(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.fetch(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.fetchval(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.fetchrow(sql, *args)

    async def execute(self, sql: str, *args: Any) -> Any:
        self._sent.append(sql)
        return await self._conn.execute(sql, *args)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the PostgreSQL board's connections send (its reads too)."""
    statements: list[str] = []
    acquire = pg_hot.Connections.acquire

    @contextlib.asynccontextmanager
    async def counting(self: pg_hot.Connections) -> AsyncIterator[Any]:
        async with acquire(self) as conn:
            yield _CountingConnection(conn, statements)

    monkeypatch.setattr(pg_hot.Connections, "acquire", counting)
    return statements


def _kinds(sent: list[str]) -> list[str]:
    """The statements by name: the batch's one statement, the one-by-one ones, the rest."""
    names = {
        pg_hot._TOGETHER: "together",
        pg_hot._REMEMBERED_UPDATE: "remembered-update",
        pg_hot._UPDATE: "update",
        pg_hot._CREATE: "create",
        pg_hot._REMEMBER: "remember",
    }
    return [names.get(s, s if s in ("BEGIN", "COMMIT", "ROLLBACK") else s[:40]) for s in sent]


async def test_a_postgres_update_with_its_result_is_one_statement(
    postgres_database: str, sent: list[str]
) -> None:
    board = await BoardStore.open(postgres_database)
    try:
        tasks = [new_task(n) for n in range(2)]
        await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
        claimed = claim_task(tasks[0], seat(1), environment=None, now=NOW + 5)
        key = IdempotencyKey("k1", "claim-task", "sha256:y")
        sent.clear()
        committed = await board.commit(Write(claimed, 1, "claim-task", "local.s1", idempotency=key))
        # the swap, its history row, its result and the change counter: one statement
        assert _kinds(sent) == ["BEGIN", "together", "COMMIT"], sent
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


async def test_a_postgres_batch_is_one_statement_and_each_write_keeps_its_outcome(
    postgres_database: str, sent: list[str], batch_sizes: list[int]
) -> None:
    board = await BoardStore.open(postgres_database)
    try:
        tasks = [new_task(n) for n in range(8)]
        await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
        await board.commit(  # an envelope id that is taken, and one whose result expired
            Write(
                claim_task(tasks[6], seat(6), environment=None, now=NOW + 100),
                1,
                "claim-task",
                "local.s6",
                idempotency=IdempotencyKey("taken", "claim-task", "sha256:x"),
            )
        )
        await board.commit(
            Write(
                claim_task(tasks[7], seat(7), environment=None, now=NOW + 101),
                1,
                "claim-task",
                "local.s7",
                idempotency=IdempotencyKey("old", "claim-task", "sha256:x"),
            )
        )
        before = await board.change_seq()

        def claim(n: int, expected: int, key: str | None, expired_before: int = 0) -> Write:
            task = claim_task(tasks[n], seat(n), environment=None, now=NOW + 200 + n)
            idempotency = (
                None
                if key is None
                else IdempotencyKey(key, "claim-task", "sha256:y", expired_before)
            )
            return Write(task, expected, "claim-task", f"local.s{n}", idempotency=idempotency)

        writes = [
            claim(0, 1, "a"),  # fine
            claim(1, 1, None),  # fine, no envelope id
            claim(2, 7, "b"),  # a refused swap: a stale revision
            claim(3, 1, "taken"),  # a taken envelope id
            claim(4, 1, "c"),  # fine, and then the same task again: a conflict
            claim(4, 1, "d"),
            claim(5, 1, "old", expired_before=NOW + 102),  # fine: the result it replaces expired
            Write(new_task(20), None, "create-task", "local.op/x"),  # a new task
            Write(new_task(7), None, "create-task", "local.op/x"),  # one that exists
        ]
        batch_sizes.clear()
        sent.clear()
        outcomes: list[Any] = await asyncio.gather(
            *(board.commit(w) for w in writes), return_exceptions=True
        )

        assert batch_sizes == [len(writes)]
        # one statement for the first write of each task, then the second of task 4 alone
        # (it sees the first's swap), then the change counter
        assert _kinds(sent)[:2] == ["BEGIN", "together"], sent
        assert _kinds(sent)[2] == "remembered-update", sent
        assert _kinds(sent)[-1] == "COMMIT", sent
        assert len(sent) == 6, sent  # ... the undo of task 4's second result, the counter
        fine = [outcomes[i] for i in (0, 1, 4, 6, 7)]
        assert all(isinstance(o, Committed) for o in fine), outcomes
        # changeSeq once per write, in arrival order
        assert [o.change_seq for o in fine] == list(range(before + 1, before + 6))
        assert [o.revision for o in fine] == [2, 2, 2, 2, 1]
        assert isinstance(outcomes[2], RevisionConflict)
        assert isinstance(outcomes[3], IdempotencyKeyTaken)
        assert isinstance(outcomes[5], RevisionConflict)
        assert isinstance(outcomes[8], RevisionConflict)
        assert await board.change_seq() == before + 5

        def commands(history: Any) -> list[str]:
            return [h.command for h in history]

        for n in (0, 1, 4):
            assert (await board.get(tasks[n].taskId)).revision == 2
            assert commands(await board.history(tasks[n].taskId)) == ["create-task", "claim-task"]
        for n in (2, 3):
            assert (await board.get(tasks[n].taskId)).revision == 1
            assert commands(await board.history(tasks[n].taskId)) == ["create-task"]
        assert commands(await board.history(tasks[5].taskId)) == ["create-task", "claim-task"]
        assert commands(await board.history("t-00020")) == ["create-task"]
        for key in ("a", "c", "old"):
            recalled = await board.recall(key, 0)
            assert recalled is not None
            assert recalled.args_digest == "sha256:y"
        for key in ("b", "d"):  # a refused write leaves no result behind
            assert await board.recall(key, 0) is None
        taken = await board.recall("taken", 0)
        assert taken is not None
        assert taken.args_digest == "sha256:x"
        assert (await board.get(tasks[7].taskId)).revision == 2  # its old claim stays
    finally:
        await board.close()


async def test_a_postgres_batch_rolls_back_when_its_envelope_id_is_taken_meanwhile(
    postgres_database: str, sent: list[str]
) -> None:
    """Another transaction records the batch's envelope id after the statement's snapshot
    (here: before it, uncommitted, committing while the statement waits on it)."""
    board = await BoardStore.open(postgres_database)
    dsn = make_url(postgres_database).set(drivername="postgresql")
    other = await asyncpg.connect(dsn.render_as_string(hide_password=False))
    try:
        task = new_task(1)
        await board.commit(Write(task, None, "create-task", "local.op/x"))
        before = await board.change_seq()
        transaction = other.transaction()
        await transaction.start()
        await other.execute(
            "INSERT INTO ct_idempotency (key, command, args_digest, result, created_at) "
            "VALUES ('raced', 'claim-task', 'sha256:x', '{}', $1)",
            NOW + 1_000,
        )
        claimed = claim_task(task, seat(1), environment=None, now=NOW + 5)
        key = IdempotencyKey("raced", "claim-task", "sha256:y")
        sent.clear()
        write = asyncio.ensure_future(
            board.commit(Write(claimed, 1, "claim-task", "local.s1", idempotency=key))
        )
        for _ in range(200):  # until the statement waits on the other transaction's id
            waiting = await other.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert waiting, "the statement never waited on the other transaction"
        await transaction.commit()
        with pytest.raises(IdempotencyKeyTaken):
            await write
        # rolled back, then the batch one by one, where the id reads as taken
        assert _kinds(sent)[:5] == ["BEGIN", "together", "ROLLBACK", "BEGIN", "remembered-update"]
        assert (await board.get(task.taskId)).revision == 1
        assert [h.command for h in await board.history(task.taskId)] == ["create-task"]
        assert await board.change_seq() == before
        recalled = await board.recall("raced", 0)
        assert recalled is not None
        assert recalled.args_digest == "sha256:x"
    finally:
        await other.close()
        await board.close()
