"""The three read commands over the real board (SQLite and PostgreSQL), mode admission
before anything runs, paging (10,000 tasks, filters, the ceiling, cursors), and the
section 4 rule that unreadable, stale and empty are three different answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from cotal_tasks.bridge.service.commands import Call, CommandService, ServiceSettings
from cotal_tasks.bridge.service.paging import encode_cursor
from cotal_tasks.core import (
    ContractError,
    ErrorCode,
    Mode,
    Seat,
    StaleMarker,
    Task,
)
from cotal_tasks.providers.board import BoardStore, normalize_url
from tests.bridge._support import (
    OPERATOR,
    PAGE_KEYS,
    Client,
    DictPresence,
    mixed_board,
    seed_board,
    task_ids,
)
from tests.conftest import Clock, seat

ALICE = seat("alice", 1)
BOB = seat("bob", 2)


# get-task


async def test_get_task_returns_the_full_record(client: Client) -> None:
    created = await client.create(
        "Write the runbook", brief="Cover restores.", evidence=[{"kind": "run", "ref": "r-1"}]
    )
    assert await client.get(created["taskId"]) == created


async def test_get_task_of_an_absent_id_is_not_found(client: Client) -> None:
    await client.create()
    error = await client.refused(ErrorCode.NOT_FOUND, "get-task", OPERATOR, {"taskId": "t-absent"})
    assert "t-absent" in error.message


@pytest.mark.parametrize(
    "args",
    [{}, {"taskId": ""}, {"taskId": "x" * 129}, {"taskId": 7}, {"taskId": "t-1", "extra": 1}],
)
async def test_get_task_refuses_malformed_args(client: Client, args: dict[str, Any]) -> None:
    await client.refused(ErrorCode.BAD_REQUEST, "get-task", OPERATOR, args)


# list-tasks and my-tasks


async def test_list_tasks_on_an_empty_board_is_a_positive_empty_page(
    client: Client, clock: Clock
) -> None:
    page = await client.list_tasks()
    assert page == {"tasks": [], "appliedLimit": 100, "observedAt": clock.ms, "changeSeq": 0}
    assert "stale" not in page
    assert "nextCursor" not in page


async def test_list_tasks_carries_summaries_in_creation_order(client: Client) -> None:
    first = await client.create("one", brief="b", evidence=[{"kind": "commit", "ref": "c"}])
    second = await client.create("two")
    page = await client.list_tasks()
    assert set(page) == PAGE_KEYS
    assert [t["taskId"] for t in page["tasks"]] == [first["taskId"], second["taskId"]]
    summary = page["tasks"][0]
    assert "brief" not in summary
    assert "evidence" not in summary
    assert summary == {k: v for k, v in first.items() if k not in ("brief", "evidence")}
    assert page["changeSeq"] == 2


async def test_my_tasks_lists_only_the_callers_bound_tasks(client: Client) -> None:
    mine_open = (await client.create("a"))["taskId"]
    mine_done = (await client.create("b"))["taskId"]
    bobs = (await client.create("c"))["taskId"]
    await client.create("unbound")
    freed = (await client.create("d"))["taskId"]
    for task_id in (mine_open, mine_done, freed):
        await client.claim(ALICE, task_id)
    await client.claim(BOB, bobs)
    await client.update(ALICE, mine_done, status="done")
    await client.administer(freed, unbind=True)

    page = await client.my_tasks(ALICE)
    assert set(page) == PAGE_KEYS
    assert [t["taskId"] for t in page["tasks"]] == [mine_open, mine_done]
    assert [t["status"] for t in page["tasks"]] == ["claimed", "done"]
    assert [t["taskId"] for t in (await client.my_tasks(BOB))["tasks"]] == [bobs]
    assert (await client.my_tasks(seat("carol", 3)))["tasks"] == []
    # mode self may name the caller itself as the target.
    same = await client.call("my-tasks", ALICE, {}, mode="self", target=ALICE)
    assert same["tasks"] == page["tasks"]


# Mode admission: refused before anything runs.

ADMISSION_REFUSALS: list[tuple[str, Mode | None, Seat | None, ErrorCode]] = [
    ("list-tasks", "self", None, ErrorCode.PERMISSION_DENIED),
    ("list-tasks", None, ALICE, ErrorCode.PERMISSION_DENIED),
    ("get-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("create-task", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("administer-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("administer-task", "self", None, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", None, None, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("bind-task", "self", None, ErrorCode.PERMISSION_DENIED),
    ("bind-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("bind-task", None, ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("update-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("update-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "self", BOB, ErrorCode.TARGET_MISMATCH),
    ("update-task", "self", BOB, ErrorCode.TARGET_MISMATCH),
    ("bind-task", "owner", None, ErrorCode.BAD_REQUEST),
    ("bind-task", "any", None, ErrorCode.BAD_REQUEST),
]


async def test_mode_admission_refuses_before_anything_runs(
    client: Client, presence: DictPresence
) -> None:
    task = await client.create()
    await client.claim(ALICE, task["taskId"])
    claimed = await client.get(task["taskId"])
    open_id = (await client.create())["taskId"]
    seq = await client.change_seq()
    presence.lookups.clear()
    # Args that would succeed if the command ran.
    valid: dict[str, dict[str, Any]] = {
        "list-tasks": {},
        "get-task": {"taskId": open_id},
        "my-tasks": {},
        "create-task": {"title": "x"},
        "administer-task": {"taskId": task["taskId"], "unbind": True},
        "bind-task": {"taskId": open_id},
        "claim-task": {"taskId": open_id},
        "update-task": {"taskId": task["taskId"], "status": "done"},
    }
    for command, mode, target, code in ADMISSION_REFUSALS:
        error = await client.refused(code, command, ALICE, valid[command], mode=mode, target=target)
        assert error.outcome == "not-executed"
    # Admission comes before argument validation, too.
    await client.refused(ErrorCode.PERMISSION_DENIED, "update-task", ALICE, {"bogus": 1})
    await client.refused(ErrorCode.PERMISSION_DENIED, "my-tasks", ALICE, {"limit": 0})
    assert await client.change_seq() == seq
    assert await client.get(task["taskId"]) == claimed
    assert "binding" not in await client.get(open_id)
    assert presence.lookups == []


async def test_an_unknown_command_is_unimplemented(client: Client) -> None:
    for command in ("delete-task", "list_tasks", ""):
        error = await client.refused(ErrorCode.UNIMPLEMENTED, command, OPERATOR, {})
        assert error.outcome == "not-executed"
    await client.refused(
        ErrorCode.UNIMPLEMENTED, "reassign-task", ALICE, {"taskId": "t"}, mode="self"
    )


# Paging


def seeded_board(count: int) -> list[Task]:
    """``count`` tasks: 60% open, then done, dropped, claimed by Alice, blocked by Bob."""
    return mixed_board(count, space="demo", claimer=ALICE, blocker=BOB)


async def test_a_board_of_10000_tasks_pages_completely(client: Client, board_url: str) -> None:
    tasks = seeded_board(10_000)
    await seed_board(board_url, tasks)
    every = [t.taskId for t in tasks]

    pages = await client.page_all("list-tasks", OPERATOR, {"limit": 100})
    assert len(pages) == 100
    assert task_ids(pages) == every
    assert all(len(page["tasks"]) == 100 and page["appliedLimit"] == 100 for page in pages)
    assert all("nextCursor" in page for page in pages[:-1])
    assert "nextCursor" not in pages[-1]
    assert {page["changeSeq"] for page in pages} == {0}

    working = await client.page_all(
        "list-tasks", OPERATOR, {"limit": 100, "status": ["blocked", "claimed"]}
    )
    assert task_ids(working) == [t.taskId for t in tasks if t.status in ("claimed", "blocked")]
    assert len(working) == 20
    closed = await client.page_all("list-tasks", OPERATOR, {"limit": 100, "status": ["done"]})
    assert task_ids(closed) == [t.taskId for t in tasks if t.status == "done"]
    assert {s["status"] for page in closed for s in page["tasks"]} == {"done"}

    mine = await client.page_all("my-tasks", ALICE, {"limit": 100}, mode="self")
    assert task_ids(mine) == [t.taskId for t in tasks if t.binding and t.binding.actor == "alice"]
    assert len(task_ids(mine)) == 1000


async def test_the_page_ceiling_narrows_a_large_limit(board: BoardStore, clock: Clock) -> None:
    service = CommandService(board, ServiceSettings(space="demo", page_ceiling=25), clock)
    client = Client(service, board)
    for n in range(30):
        await client.create(f"task {n}")
    for limit in (100_000, 26, 2**31 - 1):
        page = await client.list_tasks(limit=limit)
        assert page["appliedLimit"] == 25
        assert len(page["tasks"]) == 25
        assert "nextCursor" in page
    default = await client.list_tasks()
    assert default["appliedLimit"] == 25
    small = await client.list_tasks(limit=10)
    assert small["appliedLimit"] == 10
    assert len(small["tasks"]) == 10
    rest = await client.list_tasks(limit=100_000, cursor=default["nextCursor"])
    assert (rest["appliedLimit"], len(rest["tasks"])) == (25, 5)
    assert "nextCursor" not in rest
    mine = await client.my_tasks(ALICE, limit=100_000)
    assert mine["appliedLimit"] == 25


async def test_next_cursor_only_when_more_remain(client: Client) -> None:
    ids = [(await client.create(f"task {n}"))["taskId"] for n in range(6)]
    exact = await client.list_tasks(limit=6)
    assert [t["taskId"] for t in exact["tasks"]] == ids
    assert "nextCursor" not in exact
    first = await client.list_tasks(limit=5)
    assert [t["taskId"] for t in first["tasks"]] == ids[:5]
    last = await client.list_tasks(limit=5, cursor=first["nextCursor"])
    assert [t["taskId"] for t in last["tasks"]] == ids[5:]
    assert "nextCursor" not in last


async def test_a_cursor_continues_past_tasks_created_while_paging(client: Client) -> None:
    ids = [(await client.create(f"task {n}"))["taskId"] for n in range(4)]
    first = await client.list_tasks(limit=2)
    ids.append((await client.create("late"))["taskId"])
    rest = await client.page_all(
        "list-tasks", OPERATOR, {"limit": 2, "cursor": first["nextCursor"]}
    )
    assert [t["taskId"] for t in first["tasks"]] + task_ids(rest) == ids


@pytest.mark.parametrize(
    "args",
    [
        {"limit": 0},
        {"limit": -1},
        {"limit": "10"},
        {"limit": 1.5},
        {"limit": True},
        {"limit": None},
        {"status": ["pending"]},
        {"status": ["OPEN"]},
        {"status": []},
        {"status": "open"},
        {"offset": 10},
    ],
)
async def test_list_tasks_refuses_bad_page_controls(client: Client, args: dict[str, Any]) -> None:
    await client.refused(ErrorCode.BAD_REQUEST, "list-tasks", OPERATOR, args)


async def test_my_tasks_refuses_bad_page_controls(client: Client) -> None:
    for args in ({"limit": 0}, {"limit": -5}, {"status": ["open"]}, {"cursor": "!!"}):
        await client.refused(ErrorCode.BAD_REQUEST, "my-tasks", ALICE, args, mode="self")


async def test_a_cursor_only_continues_the_query_it_came_from(client: Client) -> None:
    for n in range(3):
        task_id = (await client.create(f"task {n}"))["taskId"]
        await client.claim(ALICE, task_id)
    plain = (await client.list_tasks(limit=1))["nextCursor"]
    claimed = (await client.list_tasks(limit=1, status=["claimed", "open"]))["nextCursor"]
    mine = (await client.my_tasks(ALICE, limit=1))["nextCursor"]

    async def refused_list(**args: Any) -> None:
        await client.refused(ErrorCode.BAD_REQUEST, "list-tasks", OPERATOR, args)

    await client.refused(ErrorCode.BAD_REQUEST, "my-tasks", ALICE, {"cursor": plain}, mode="self")
    await refused_list(cursor=mine)
    await refused_list(cursor=plain, status=["claimed"])
    await refused_list(cursor=claimed)
    await refused_list(cursor=claimed, status=["claimed"])
    await refused_list(cursor=claimed, status=["claimed", "done"])
    for garbage in ("garbage", "AAAA", "e30", "x" * 513, "not base64!", "eyJwIjogLTF9"):
        await refused_list(cursor=garbage)
    # The same filter in another order is the same query.
    same = await client.list_tasks(limit=1, status=["open", "claimed"], cursor=claimed)
    assert len(same["tasks"]) == 1


async def test_a_forged_cursor_past_int64_is_a_bad_request(client: Client) -> None:
    await client.create()
    forged = encode_cursor(2**63, "list-tasks", None)
    with pytest.raises(ContractError) as caught:
        await client.list_tasks(cursor=forged)
    assert caught.value.code is ErrorCode.BAD_REQUEST


# Unreadable, stale and empty are three different answers (section 4).


def garbage_file(path: Path) -> str:
    path.write_bytes(bytes(range(256)) * 64)
    return f"sqlite:///{path}"


async def read_all_refused(client: Client, code: ErrorCode) -> None:
    await client.refused(code, "list-tasks", OPERATOR, {})
    await client.refused(code, "list-tasks", OPERATOR, {"status": ["open"]})
    await client.refused(code, "my-tasks", ALICE, {}, mode="self")
    await client.refused(code, "get-task", OPERATOR, {"taskId": "t-1"})


async def test_a_garbage_sqlite_file_is_unavailable_not_empty(tmp_path: Path, clock: Clock) -> None:
    url = garbage_file(tmp_path / "board.db")
    with pytest.raises(ContractError) as caught:
        await BoardStore.open(url)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    store = await BoardStore.open(url, migrate=False)
    try:
        client = Client(CommandService(store, ServiceSettings(space="demo"), clock), store)
        await read_all_refused(client, ErrorCode.UNAVAILABLE)
    finally:
        await store.close()


async def test_a_board_file_corrupted_after_use_is_unavailable(
    sqlite_url: str, tmp_path: Path, clock: Clock
) -> None:
    store = await BoardStore.open(sqlite_url)
    client = Client(CommandService(store, ServiceSettings(space="demo"), clock), store)
    await client.create()
    await store.close()
    for leftover in tmp_path.glob("board.db-*"):
        leftover.unlink()
    garbage_file(tmp_path / "board.db")
    reopened = await BoardStore.open(sqlite_url, migrate=False)
    try:
        client = Client(CommandService(reopened, ServiceSettings(space="demo"), clock), reopened)
        await read_all_refused(client, ErrorCode.UNAVAILABLE)
    finally:
        await reopened.close()


async def execute(url: str, statement: str) -> None:
    engine = create_async_engine(normalize_url(url))
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def test_a_board_without_its_tasks_table_is_unavailable(
    client: Client, board_url: str
) -> None:
    await client.create()
    await execute(board_url, "DROP TABLE ct_tasks")
    await read_all_refused(client, ErrorCode.UNAVAILABLE)


async def test_a_damaged_stored_record_is_unavailable(client: Client, board_url: str) -> None:
    task_id = (await client.create())["taskId"]
    await execute(board_url, "UPDATE ct_tasks SET summary = '{\"title\": 1}', body = 'not json'")
    await client.refused(ErrorCode.UNAVAILABLE, "list-tasks", OPERATOR, {})
    await client.refused(ErrorCode.UNAVAILABLE, "get-task", OPERATOR, {"taskId": task_id})


class StaleBoard(BoardStore):
    """A board that reports its reads as served from a lagging source."""

    marker = StaleMarker(staleAsOf=1_779_999_990_000, reason="replica is 10 s behind")

    async def freshness(self) -> StaleMarker | None:
        return self.marker


async def test_a_degraded_store_labels_every_page_stale(board_url: str, clock: Clock) -> None:
    store = await StaleBoard.open(board_url)
    try:
        client = Client(CommandService(store, ServiceSettings(space="demo"), clock), store)
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
