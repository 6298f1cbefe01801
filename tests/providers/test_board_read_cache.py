"""The serving process's read cache of a SQLite board, seen through the store.

A process that serves a SQLite board (``serve=True``) holds the sole-writer lock and
caches reads. ``get_json`` answers a cached task from its kept wire form (the same
object every time, never rebuilt from the model), a miss reads the row and fills the
cache, and every commit replaces what the cache holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import Write
from tests.providers.conftest import new_task


def _renamed(task: Task, title: str) -> Task:
    return Task.model_validate({**task.to_json(), "title": title, "updatedAt": task.updatedAt + 1})


@asynccontextmanager
async def _board(url: str, *, serve: bool) -> AsyncIterator[BoardStore]:
    store = await BoardStore.open(url, serve=serve)
    try:
        yield store
    finally:
        await store.close()


async def _written_elsewhere(url: str, *tasks: Task) -> None:
    """Commit ``tasks`` from a process that does not serve the board (no cache)."""
    async with _board(url, serve=False) as writer:
        for task in tasks:
            await writer.commit(Write(task, None, "create-task", "local.op/x"))


async def test_a_cached_task_is_answered_from_its_kept_wire_form(tmp_path: Path) -> None:
    async with _board(f"sqlite:///{tmp_path / 'board.db'}", serve=True) as store:
        task = new_task(1)
        await store.commit(Write(task, None, "create-task", "local.op/x"))
        first = await store.get_json(task.taskId)
        assert first == task.to_json()
        assert await store.get_json(task.taskId) is first  # kept, not rebuilt


async def test_a_miss_reads_the_row_and_fills_the_cache(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    task = new_task(2)
    await _written_elsewhere(url, task)
    async with _board(url, serve=True) as store:
        first = await store.get_json(task.taskId)  # not cached yet: read from the file
        assert first == task.to_json()
        assert await store.get_json(task.taskId) is first  # now answered from the cache
        stored = await store.get(task.taskId)  # the model, decoded once from the kept row
        assert (stored.task, stored.revision) == (task, 1)
        assert await store.get(task.taskId) is stored


async def test_a_commit_replaces_the_cached_forms(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'board.db'}"
    task = new_task(3)
    await _written_elsewhere(url, task)
    async with _board(url, serve=True) as store:
        await store.get_json(task.taskId)
        renamed = _renamed(task, "renamed")
        await store.commit(Write(renamed, 1, "update-task", "local.op/x"))
        assert (await store.get_json(task.taskId))["title"] == "renamed"
        stored = await store.get(task.taskId)
        assert (stored.task, stored.revision) == (renamed, 2)


async def test_a_cached_row_that_does_not_validate_reads_as_unavailable(tmp_path: Path) -> None:
    """A row read for its wire form is decoded to the model only when ``get`` needs it;
    a row that is JSON of the record version but not a valid record is refused then."""
    path = tmp_path / "board.db"
    url = f"sqlite:///{path}"
    task = new_task(4)
    await _written_elsewhere(url, task)
    damaged = {**task.to_json(), "title": ""}  # the record version, but no valid title
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE ct_tasks SET body = ? WHERE task_id = ?", (json.dumps(damaged), task.taskId)
        )
    async with _board(url, serve=True) as store:
        assert (await store.get_json(task.taskId))["title"] == ""
        for _ in range(2):  # refused every time, never cached as a model
            with pytest.raises(ContractError) as caught:
                await store.get(task.taskId)
            assert caught.value.code is ErrorCode.UNAVAILABLE
