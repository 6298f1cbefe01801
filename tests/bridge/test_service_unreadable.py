"""Section 4's rule over the real board: unreadable, stale and empty are three different
answers; and a call carries no caller from its payload."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.core import ContractError, ErrorCode, StaleMarker
from cotal_tasks.providers.board import BoardStore, normalize_url
from tests.bridge._support import ALICE, OPERATOR, Client
from tests.conftest import Clock

# Unreadable, stale and empty are three different answers (section 4).


def garbage_file(path: Path) -> str:
    path.write_bytes(bytes(range(256)) * 64)
    return f"sqlite:///{path}"


async def read_all_refused(client: Client, code: ErrorCode) -> None:
    await client.refused(code, "list-tasks", OPERATOR, {})
    await client.refused(code, "list-tasks", OPERATOR, {"status": ["open"]})
    await client.refused(code, "my-tasks", ALICE, {}, mode="self")
    await client.refused(code, "get-task", OPERATOR, {"taskId": "t-1"})


async def reads_unavailable_when_opened_as_is(url: str, clock: Clock) -> None:
    """Open the board at ``url`` without migrating it: every read is unavailable."""
    store = await BoardStore.open(url, migrate=False)
    try:
        await read_all_refused(Client.over(store, clock), ErrorCode.UNAVAILABLE)
    finally:
        await store.close()


async def test_a_garbage_sqlite_file_is_unavailable_not_empty(tmp_path: Path, clock: Clock) -> None:
    url = garbage_file(tmp_path / "board.db")
    with pytest.raises(ContractError) as caught:
        await BoardStore.open(url)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    await reads_unavailable_when_opened_as_is(url, clock)


async def test_a_board_file_corrupted_after_use_is_unavailable(
    sqlite_url: str, tmp_path: Path, clock: Clock
) -> None:
    store = await BoardStore.open(sqlite_url)
    await Client.over(store, clock).create()
    await store.close()
    for leftover in tmp_path.glob("board.db-*"):
        leftover.unlink()
    garbage_file(tmp_path / "board.db")
    await reads_unavailable_when_opened_as_is(sqlite_url, clock)


async def execute(url: str, statement: str) -> None:
    engine = create_async_engine(normalize_url(url))
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def test_a_board_without_its_tasks_table_is_unavailable(
    board_client: Client, board_url: str
) -> None:
    await board_client.create()
    await execute(board_url, "DROP TABLE ct_tasks")
    await read_all_refused(board_client, ErrorCode.UNAVAILABLE)


async def test_a_damaged_stored_record_is_unavailable(board_client: Client, board_url: str) -> None:
    task_id = (await board_client.create())["taskId"]
    await execute(board_url, "UPDATE ct_tasks SET summary = '{\"title\": 1}', body = 'not json'")
    await board_client.refused(ErrorCode.UNAVAILABLE, "list-tasks", OPERATOR, {})
    await board_client.refused(ErrorCode.UNAVAILABLE, "get-task", OPERATOR, {"taskId": task_id})


class StaleBoard(BoardStore):
    """A board that reports its reads as served from a lagging source."""

    marker = StaleMarker(staleAsOf=1_779_999_990_000, reason="replica is 10 s behind")

    async def freshness(self) -> StaleMarker | None:
        return self.marker


async def test_a_degraded_store_labels_every_page_stale(board_url: str, clock: Clock) -> None:
    store = await StaleBoard.open(board_url)
    try:
        client = Client.over(store, clock)
        expected = {"staleAsOf": 1_779_999_990_000, "reason": "replica is 10 s behind"}
        empty = await client.list_tasks()
        assert empty["tasks"] == []
        assert empty["stale"] == expected
        task_id = (await client.create())["taskId"]
        await client.claim(ALICE, task_id)
        page = await client.list_tasks()
        assert [t["taskId"] for t in page["tasks"]] == [task_id]
        assert page["stale"] == expected
        assert (await client.my_tasks(ALICE))["stale"] == expected
    finally:
        await store.close()


async def test_a_healthy_board_never_carries_stale(client: Client) -> None:
    assert "stale" not in await client.list_tasks()
    task_id = (await client.create())["taskId"]
    await client.claim(ALICE, task_id)
    assert "stale" not in await client.list_tasks()
    assert "stale" not in await client.my_tasks(ALICE)


async def test_a_call_carries_no_caller_from_the_payload(client: Client) -> None:
    """The seat comes from the transport: a payload naming another seat is refused."""
    task_id = (await client.create())["taskId"]
    for extra in ({"caller": "local.bob"}, {"owner": "local", "actor": "bob"}):
        await client.refused(
            ErrorCode.BAD_REQUEST, "claim-task", ALICE, {"taskId": task_id, **extra}, mode="self"
        )
    call = Call("claim-task", ALICE, "e-1", {"taskId": task_id}, mode="self")
    claimed = await client.service.handle(call)
    assert claimed["binding"]["actor"] == "alice"
