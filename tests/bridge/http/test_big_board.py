"""A board of 10,000 tasks, paged through over HTTP to the end: every task once, in order,
at the ceiling, with and without a status filter, and a seat's own tasks by token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.core import Task
from tests.bridge._support import mixed_board, seed_board
from tests.bridge.http._support import (
    ACME,
    BUILDER,
    OTHER,
    READER_ENV,
    SEAT_ENV,
    TOKENS,
    HttpMesh,
    bearer,
    empty_board,
    open_http_mesh,
    set_secrets,
)
from tests.support.paging import follow_cursor, task_ids

COUNT = 10_000
Json = dict[str, Any]


def board_of(count: int) -> list[Task]:
    """60% open, 10% done, 10% dropped, 10% claimed by BUILDER, 10% blocked by OTHER."""
    return mixed_board(count, space="conf", claimer=BUILDER, blocker=OTHER)


async def page_all(mesh: HttpMesh, path: str, headers: dict[str, str], **params: str) -> list[Json]:
    """Every page of ``path`` over HTTP, to the end."""
    return await follow_cursor(lambda query: mesh.ok(path, params=query, headers=headers), params)


@pytest.mark.timeout(240)
async def test_a_board_of_10000_tasks_pages_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_secrets(monkeypatch)
    tasks = board_of(COUNT)

    async def seed(config: BridgeConfig) -> None:
        await seed_board(await empty_board(config), tasks)

    async with open_http_mesh(tmp_path, tokens=TOKENS, before_start=seed) as mesh:
        reader = bearer(READER_ENV)
        path = f"/v1/endpoints/{ACME}/tasks"

        pages = await page_all(mesh, path, reader, limit="1000")
        assert len(pages) == COUNT // 100
        assert task_ids(pages) == [task.taskId for task in tasks]
        assert all(page["appliedLimit"] == 100 for page in pages)
        assert all(len(page["tasks"]) == 100 for page in pages)
        assert all("stale" not in page for page in pages)

        done = await page_all(mesh, path, reader, status="done,blocked", limit="100")
        expected = [t.taskId for t in tasks if t.status in ("done", "blocked")]
        assert task_ids(done) == expected
        assert len(expected) == 2000
        assert {task["status"] for page in done for task in page["tasks"]} == {"done", "blocked"}

        mine = await page_all(mesh, f"/v1/endpoints/{ACME}/my-tasks", bearer(SEAT_ENV))
        builders = [t.taskId for t in tasks if t.binding and t.binding.actor == "builder"]
        assert task_ids(mine) == builders
        assert len(builders) == 1000

        # The board feed pages the same way, with the full records the cards show.
        board = await mesh.ok(
            f"/v1/endpoints/{ACME}/board", params={"status": "blocked"}, headers=reader
        )
        assert len(board["tasks"]) == 100
        assert board["tasks"][0]["evidence"] == []
        assert board["liveness"][str(OTHER)]["view"] == "unpopulated"
