"""Two-way on a tower-do board: an agent edits a row before, during (between the
endpoint's fold and its append) and after a seat's write. Each case checks the documented
winner on the board and in the mirror (docs/tower-do.md, "Who wins"), that nothing an
agent wrote is undone, that the seat's write is neither lost nor written twice, that the
reply says what the board holds, and that idle refreshes write nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cotal_tasks.providers.tower_do.fold import fold_text
from tests.providers.tower_do._support import (
    READER,
    WORKER,
    Board,
    Json,
    agent_event,
    refused,
    tower_of,
)

KEY = "shared"


def row(board: Board, key: str = KEY) -> Any:
    return fold_text(board.path.read_text("utf-8")).tasks.get(key)


def seat_events(board: Board) -> list[Json]:
    return [e for e in board.events() if e["kind"] == "task" and e["by"] == "coder-1"]


async def claimed_by_the_seat(board: Board) -> None:
    board.agent(agent_event(KEY, "Shared work", "pending", "main", 1000, description="v1"))
    await board.refresh()
    await board.call("claim-task", WORKER, {"taskId": KEY}, mode="self")


async def idle_refreshes_write_nothing(board: Board) -> None:
    size = board.path.stat().st_size
    for _ in range(3):
        await board.refresh()
    assert board.path.stat().st_size == size


def during_the_append(board: Board, line: str) -> Callable[[], None]:
    """The agent appends ``line`` (a tower-do release without the lease) after the
    endpoint folded for its write and before it appends: its first append is refused as
    moved, and the write is decided again on the fold that holds the agent's line."""
    file = tower_of(board.endpoint).store.board
    append = file.append
    done: list[bool] = []

    def racing(events: list[dict[str, Any]]) -> None:
        if not done:
            done.append(True)
            board.agent(line)
        append(events)

    file.append = racing  # type: ignore[method-assign]
    return lambda: setattr(file, "append", append)


@pytest.mark.parametrize("when", ["before", "during"])
async def test_an_agents_retitle_and_a_seats_status_both_land(board: Board, when: str) -> None:
    await claimed_by_the_seat(board)
    line = agent_event(
        KEY, "Shared work, retitled", "in_progress", "tower", 2000, owner="coder-1",
        description="v2",
    )  # fmt: skip
    restore = None
    if when == "before":
        board.agent(line)  # written before the seat's command; the mirror has not folded it
    else:
        restore = during_the_append(board, line)
    before = len(seat_events(board))
    reply = await board.call(
        "update-task", WORKER, {"taskId": KEY, "status": "blocked", "note": "waits"}, mode="self"
    )
    if restore:
        restore()
    now = row(board)
    assert (now.subject, now.description, now.status) == ("Shared work, retitled", "v2", "blocked")
    assert (reply["title"], reply["brief"], reply["status"]) == (
        "Shared work, retitled",
        "v2",
        "blocked",
    )
    assert len(seat_events(board)) == before + 1  # written once
    record = await board.call("get-task", READER, {"taskId": KEY})
    assert (record["title"], record["status"]) == ("Shared work, retitled", "blocked")
    await idle_refreshes_write_nothing(board)


async def test_an_agents_edit_after_the_seats_write_is_mirrored(board: Board) -> None:
    await claimed_by_the_seat(board)
    await board.call("update-task", WORKER, {"taskId": KEY, "status": "blocked"}, mode="self")
    board.agent(
        agent_event(
            KEY,
            "Renamed after",
            "blocked",
            "coder-1",
            3000,
            owner="coder-1",
            blockedBy=["waits"],
            description="v3",
        )
    )
    await board.refresh()
    record = await board.call("get-task", READER, {"taskId": KEY})
    assert (record["title"], record["brief"], record["status"]) == (
        "Renamed after",
        "v3",
        "blocked",
    )
    await idle_refreshes_write_nothing(board)


async def test_a_seats_claim_of_a_row_an_agent_took_first_is_a_conflict(board: Board) -> None:
    """The ownership guard decides: the agent's claim landed first, so the seat's claim,
    sent on a stale read, is refused and changes nothing."""
    board.agent(agent_event(KEY, "Shared work", "pending", "main", 1000))
    await board.refresh()
    board.agent(agent_event(KEY, "Shared work", "in_progress", "alice", 2000, owner="alice"))
    before = board.path.read_bytes()
    error = await refused(board, "claim-task", WORKER, {"taskId": KEY}, mode="self")
    assert error.code.value == "conflict"
    assert board.path.read_bytes() == before
    record = await board.call("get-task", READER, {"taskId": KEY})
    assert (record["status"], record["statusSource"]) == ("open", "in_progress")  # alice: no seat


async def test_a_row_an_agent_removed_is_not_written_again(board: Board) -> None:
    """An agent removes the row while the seat holds it: the seat's next update is
    decided on the board as it is, so the row does not come back (that would undo the
    removal and lose its description); the reply says so, ``conflict``."""
    await claimed_by_the_seat(board)
    board.agent('{"kind":"task","op":"remove","key":"shared","by":"tower","at":4000}\n')
    before = board.path.read_bytes()
    error = await refused(
        board, "update-task", WORKER, {"taskId": KEY, "status": "done"}, mode="self"
    )
    assert error.code.value == "conflict"
    assert "create-task" in error.message
    assert board.path.read_bytes() == before
    record = await board.call("get-task", READER, {"taskId": KEY})
    assert (record["status"], record["statusSource"]) == ("dropped", "removed")
    await idle_refreshes_write_nothing(board)


async def test_an_agents_dependency_edit_is_kept_by_the_seats_write(board: Board) -> None:
    """dependsOn belongs to the agents: a seat's write never changes it, so an agent's
    dependency added before the seat's write stays, and tower-do's gate applies to it."""
    await claimed_by_the_seat(board)
    board.agent(agent_event("prep", "Prep", "completed", "main", 1500))
    board.agent(
        agent_event(
            KEY,
            "Shared work",
            "in_progress",
            "coder-1",
            2000,
            owner="coder-1",
            description="v1",
            dependsOn=["prep"],
        )
    )
    await board.call("update-task", WORKER, {"taskId": KEY, "status": "done"}, mode="self")
    assert row(board).depends_on == ("prep",)
    assert row(board).status == "completed"
