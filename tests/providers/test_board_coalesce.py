"""A PostgreSQL board answers the point reads of one turn of the event loop (a write's
current state, an update's idempotency result) with one query, each caller its own row;
a failed query fails each caller with an error of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode, claim_task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.board import postgres as pg_hot
from cotal_tasks.providers.board.coalesce import Coalesced
from cotal_tasks.providers.store import IdempotencyKey, Write
from tests.conftest import seat
from tests.providers.conftest import NOW, new_task

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    rows = pg_hot.PostgresBoard.rows

    async def counting(self: Any, where: str, sql: str, params: Sequence[Any] = ()) -> Any:
        sent.append(sql)
        return await rows(self, where, sql, params)

    monkeypatch.setattr(pg_hot.PostgresBoard, "rows", counting)
    return sent


async def test_the_reads_of_one_turn_are_one_query(
    postgres_database: str, queries: list[str]
) -> None:
    board = await BoardStore.open(postgres_database)
    try:
        tasks = [new_task(n) for n in range(20)]
        await board.commit_many([Write(t, None, "create-task", "local.op/x") for t in tasks])
        for n in range(3):
            claimed = claim_task(tasks[n], seat("s", n), environment=None, now=NOW + n)
            key = IdempotencyKey(f"k{n}", "claim-task", f"sha256:{n}")
            await board.commit(Write(claimed, 1, "claim-task", f"local.s{n}", idempotency=key))
        queries.clear()
        got = await asyncio.gather(*(board.get(t.taskId) for t in tasks))
        assert len(queries) == 1
        assert [g.task.taskId for g in got] == [t.taskId for t in tasks]
        assert [g.revision for g in got] == [2, 2, 2] + [1] * 17
        queries.clear()
        missing = await asyncio.gather(board.get("t-nowhere"), return_exceptions=True)
        assert isinstance(missing[0], ContractError)
        assert missing[0].code is ErrorCode.NOT_FOUND
        queries.clear()
        recalled = await asyncio.gather(
            board.recall("k0", 0),
            board.recall("k1", NOW + 2),  # recorded at NOW + 1: expired for this caller
            board.recall("k2", 0),
            board.recall("k-none", 0),
        )
        assert len(queries) == 1
        assert [r.args_digest if r else None for r in recalled] == [
            "sha256:0",
            None,
            "sha256:2",
            None,
        ]
    finally:
        await board.close()


async def test_a_failed_query_fails_each_caller_with_its_own_error() -> None:
    calls: list[Sequence[str]] = []

    async def fetch(keys: Sequence[str]) -> dict[str, int]:
        calls.append(keys)
        raise ContractError(ErrorCode.UNAVAILABLE, "the board is down. Retry")

    reads: Coalesced[str, int] = Coalesced(fetch)
    outcomes = await asyncio.gather(reads.get("a"), reads.get("b"), return_exceptions=True)
    assert calls == [["a", "b"]]
    first, second = outcomes
    assert isinstance(first, ContractError)
    assert isinstance(second, ContractError)
    assert first is not second
    first.with_outcome("unknown")
    assert second.outcome is None


async def test_each_key_is_fetched_once_and_every_asker_answered() -> None:
    calls: list[Sequence[str]] = []

    async def fetch(keys: Sequence[str]) -> dict[str, int]:
        calls.append(keys)
        return {key: len(key) for key in keys if key != "none"}

    reads: Coalesced[str, int] = Coalesced(fetch)
    got = await asyncio.gather(reads.get("aa"), reads.get("aa"), reads.get("none"))
    assert list(got) == [2, 2, None]
    assert calls == [["aa", "none"]]
    assert await reads.get("bbb") == 3  # a later turn, a query of its own
    assert calls[-1] == ["bbb"]
