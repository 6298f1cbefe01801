"""tower-do's rules over the whole board a write produces, as tower-do's
``writeBoardSnapshot`` checks every row it replays: a write that would leave a claimed or
done row waiting on an unfinished dependency is refused, because tower-do would refuse
every later write to that board, by any agent. And a key an agent has just written is
looked up on the board before a command answers ``not-found``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cotal_tasks.providers.tower_do import rules
from cotal_tasks.providers.tower_do.fold import fold_text
from tests.providers.tower_do._support import (
    READER,
    WORKER,
    Board,
    agent_event,
    refused,
)


def tower_do_would_take_a_write(board: Board) -> None:
    """tower-do's own check of the board as it is now: every row's dependencies, as its
    ``assertDependenciesAreConsistent`` checks the full replacement any write replays."""
    fold = fold_text(board.path.read_text("utf-8"))
    for row in fold.tasks.values():
        assert all(dep in fold.tasks for dep in row.depends_on)
        if row.status in ("in_progress", "completed"):
            assert all(fold.tasks[dep].status == "completed" for dep in row.depends_on), row


async def seat_done_with_a_done_dependent(board: Board) -> str:
    """``base``, claimed and done by the worker; ``child`` (done, by alice) depends on it."""
    created = await board.call("create-task", READER, {"title": "Base"})
    key = str(created["taskId"])
    await board.call("claim-task", WORKER, {"taskId": key}, mode="self")
    await board.call("update-task", WORKER, {"taskId": key, "status": "done"}, mode="self")
    board.agent(agent_event("child", "Child", "completed", "alice", 3000, dependsOn=[key]))
    await board.refresh()
    return key


async def test_a_done_task_done_tasks_depend_on_cannot_go_back_to_claimed(board: Board) -> None:
    key = await seat_done_with_a_done_dependent(board)
    before = board.path.read_bytes()
    error = await refused(
        board, "update-task", WORKER, {"taskId": key, "status": "claimed"}, mode="self"
    )
    assert error.code.value == "failed-precondition"
    assert "child (done)" in error.message
    assert "administer-task" in error.message  # the remedy
    assert board.path.read_bytes() == before  # nothing written
    record = await board.call("get-task", READER, {"taskId": key})
    assert record["status"] == "done"
    tower_do_would_take_a_write(board)
    # The board still takes writes: an agent's next write is not locked out.
    assert (await board.call("create-task", READER, {"title": "Next"}))["status"] == "open"


async def test_reopening_a_task_claimed_tasks_depend_on_is_refused(board: Board) -> None:
    board.agent(agent_event("base", "Base", "completed", "main", 1000))
    board.agent(
        agent_event(
            "child", "Child", "in_progress", "alice", 1001, owner="alice", dependsOn=["base"]
        )
    )
    await board.refresh()
    before = board.path.read_bytes()
    error = await refused(board, "administer-task", READER, {"taskId": "base", "status": "open"})
    assert error.code.value == "failed-precondition"
    assert "child (claimed)" in error.message
    assert board.path.read_bytes() == before
    tower_do_would_take_a_write(board)
    # Once its agent moves the dependent back first, the reopen is taken.
    board.agent(
        agent_event("child", "Child", "pending", "alice", 1002, owner="alice", dependsOn=["base"])
    )
    reopened = await board.call("administer-task", READER, {"taskId": "base", "status": "open"})
    assert reopened["status"] == "open"
    tower_do_would_take_a_write(board)


async def test_a_board_already_broken_refuses_as_tower_do_does(board: Board) -> None:
    """A row that already waits on an unfinished one (an older release wrote it, or two
    writers raced): tower-do refuses every write until it is fixed, and so does the
    endpoint, naming the row to fix rather than writing a board tower-do would refuse."""
    board.agent(agent_event("dep", "Dep", "pending", "main", 1000))
    board.agent(agent_event("ahead", "Ahead", "completed", "main", 1001, dependsOn=["dep"]))
    await board.refresh()
    error = await refused(board, "create-task", READER, {"title": "Anything"})
    assert error.code.value == "failed-precondition"
    assert "already holds a broken row" in error.message
    assert "task ahead" in error.message
    # The write that repairs it produces a board tower-do takes, so it is taken.
    repaired = await board.call("administer-task", READER, {"taskId": "ahead", "status": "open"})
    assert repaired["status"] == "open"
    tower_do_would_take_a_write(board)
    assert (await board.call("create-task", READER, {"title": "Anything"}))["status"] == "open"


def test_the_rule_checks_every_row_not_only_the_written_one() -> None:
    fold = fold_text(
        agent_event("base", "Base", "completed", "main", 1)
        + agent_event("child", "Child", "completed", "main", 2, dependsOn=["base"])
    )
    back = fold.tasks["base"]
    with pytest.raises(rules.WriteRefused) as refusal:
        rules.plan_upsert(fold, replace(back, status="in_progress"), "tower", set(), 10)
    assert refusal.value.rule == "dependency"


async def test_a_key_an_agent_just_wrote_is_found_before_the_follower_folds_it(
    board: Board,
) -> None:
    board.agent(agent_event("fresh", "Just written", "pending", "main", 1000))
    # No refresh: the follower has not folded the line yet.
    claimed = await board.call("claim-task", WORKER, {"taskId": "fresh"}, mode="self")
    assert claimed["status"] == "claimed"
    missing = await refused(board, "get-task", READER, {"taskId": "never-written"})
    assert missing.code.value == "not-found"
