"""Paging the read commands over the real board: 10,000 tasks, filters, the ceiling and
cursors."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.bridge.service.commands import ServiceSettings
from cotal_tasks.bridge.service.paging import encode_cursor
from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import (
    ALICE,
    BOB,
    OPERATOR,
    Client,
    mixed_board,
    seed_board,
    service_over,
)
from tests.conftest import Clock
from tests.support.paging import task_ids

# Paging


def seeded_board(count: int) -> list[Task]:
    """``count`` tasks: 60% open, then done, dropped, claimed by Alice, blocked by Bob."""
    return mixed_board(count, space="demo", claimer=ALICE, blocker=BOB)


async def test_a_board_of_10000_tasks_pages_completely(
    board_client: Client, board_url: str
) -> None:
    tasks = seeded_board(10_000)
    await seed_board(board_url, tasks)
    every = [t.taskId for t in tasks]

    pages = await board_client.page_all("list-tasks", OPERATOR, {"limit": 100})
    assert len(pages) == 100
    assert task_ids(pages) == every
    assert all(len(page["tasks"]) == 100 and page["appliedLimit"] == 100 for page in pages)
    assert all("nextCursor" in page for page in pages[:-1])
    assert "nextCursor" not in pages[-1]
    assert {page["changeSeq"] for page in pages} == {0}

    working = await board_client.page_all(
        "list-tasks", OPERATOR, {"limit": 100, "status": ["blocked", "claimed"]}
    )
    assert task_ids(working) == [t.taskId for t in tasks if t.status in ("claimed", "blocked")]
    assert len(working) == 20
    closed = await board_client.page_all("list-tasks", OPERATOR, {"limit": 100, "status": ["done"]})
    assert task_ids(closed) == [t.taskId for t in tasks if t.status == "done"]
    assert {s["status"] for page in closed for s in page["tasks"]} == {"done"}

    mine = await board_client.page_all("my-tasks", ALICE, {"limit": 100}, mode="self")
    assert task_ids(mine) == [t.taskId for t in tasks if t.binding and t.binding.actor == "alice"]
    assert len(task_ids(mine)) == 1000


async def test_the_page_ceiling_narrows_a_large_limit(store: TaskStore, clock: Clock) -> None:
    service = service_over(store, ServiceSettings(space="demo", page_ceiling=25), clock)
    client = Client(service, store)
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
