"""A tower-do endpoint, both ways, over a real board file: what tower-do agents append is
read; what the endpoint writes lands as tower-do's own events, under its rules."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.core import ContractError, Task
from cotal_tasks.providers.store import PageQuery, RevisionConflict, Write
from cotal_tasks.providers.tower_do import TowerDoConfig, boardfile
from cotal_tasks.providers.tower_do.fold import fold_text
from cotal_tasks.providers.tower_do.folder import Folder
from tests.bridge._support import Client
from tests.providers.tower_do._support import (
    READER,
    SEATS,
    WORKER,
    Board,
    agent_event,
    refused,
    tower_of,
)


async def test_agent_rows_are_read_and_follow_the_file(board: Board) -> None:
    board.agent(
        agent_event(
            "gemm",
            "Speed up GEMM",
            "in_progress",
            "coder-1",
            1000,
            owner="coder-1",
            description="Tile it.",
        )
    )
    board.agent(agent_event("docs", "Write docs", "in_progress", "alice", 1001, owner="alice"))
    assert await board.refresh() == 2
    gemm = await board.call("get-task", READER, {"taskId": "gemm"})
    assert (gemm["title"], gemm["brief"], gemm["status"], gemm["statusSource"]) == (
        "Speed up GEMM",
        "Tile it.",
        "claimed",
        "in_progress",
    )
    assert (gemm["binding"]["owner"], gemm["binding"]["actor"]) == ("local", "worker")
    docs = await board.call("get-task", READER, {"taskId": "docs"})
    assert (docs["status"], docs.get("binding")) == ("open", None)  # alice is no seat
    board.agent(
        json.dumps({"kind": "task", "op": "remove", "key": "docs", "by": "alice", "at": 1002})
        + "\n"
    )
    await board.refresh()
    docs = await board.call("get-task", READER, {"taskId": "docs"})
    assert (docs["status"], docs["statusSource"]) == ("dropped", "removed")


async def test_writes_land_as_tower_do_events_and_refold(board: Board) -> None:
    created = await board.call("create-task", READER, {"title": "Port the parser"})
    key = created["taskId"]
    assert key.startswith("port-the-parser-")
    claimed = await board.call("claim-task", WORKER, {"taskId": key}, mode="self")
    assert claimed["status"] == "claimed"
    blocked = await board.call(
        "update-task",
        WORKER,
        {"taskId": key, "status": "blocked", "note": "needs the grammar"},
        mode="self",
    )
    assert blocked["status"] == "blocked"
    done = await board.call("update-task", WORKER, {"taskId": key, "status": "done"}, mode="self")
    assert done["status"] == "done"
    events = board.events()
    tasks = [e for e in events if e["kind"] == "task"]
    assert [(e["task"]["status"], e["task"].get("owner"), e["by"]) for e in tasks] == [
        ("pending", None, "cotal"),
        ("in_progress", "coder-1", "coder-1"),
        ("blocked", "coder-1", "coder-1"),
        ("completed", "coder-1", "coder-1"),
    ]
    assert tasks[2]["task"]["blockedBy"] == ["needs the grammar"]
    assert tasks[3]["task"]["blockedBy"] == []
    (note,) = [e for e in events if e["kind"] == "message"]
    assert (note["message"]["taskKey"], note["message"]["body"]) == (key, "needs the grammar")
    fold = fold_text(board.path.read_text("utf-8"))
    assert (fold.revision, fold.tasks[key].status, fold.skipped) == (4, "completed", 0)
    history = await board.endpoint.store.history(key)
    assert [entry.command for entry in history] == [
        "create-task",
        "claim-task",
        "update-task",
        "update-task",
    ]  # the refold after each write found nothing more to mirror


async def test_a_description_and_a_note_keep_their_lines_both_ways(board: Board) -> None:
    description = "Tile it:\n\n- rows first\n- then columns"
    board.agent(
        agent_event("gemm", "Speed up GEMM", "pending", "alice", 1000, description=description)
    )
    await board.refresh()
    task = await board.call("get-task", READER, {"taskId": "gemm"})
    assert task["brief"] == "Tile it:\u2029- rows first\u2028- then columns"
    await board.call("claim-task", WORKER, {"taskId": "gemm"}, mode="self")
    brief, note = "Tiled:\u2029- 2x faster", "Measured\u2028twice"
    await board.call(
        "update-task", WORKER, {"taskId": "gemm", "brief": brief, "note": note}, mode="self"
    )
    events = board.events()
    written = [e["task"] for e in events if e["kind"] == "task"][-1]
    assert written["description"] == "Tiled:\n\n- 2x faster"  # the board file's own breaks
    (message,) = [e["message"] for e in events if e["kind"] == "message"]
    assert message["body"] == "Measured\ntwice"
    await board.refresh()
    assert (await board.call("get-task", READER, {"taskId": "gemm"}))["brief"] == brief


async def test_the_ownership_guard_refuses_and_writes_nothing(board: Board) -> None:
    board.agent(agent_event("mine", "Alice's task", "in_progress", "alice", 1000, owner="alice"))
    await board.refresh()
    before = board.path.read_bytes()
    error = await refused(board, "claim-task", WORKER, {"taskId": "mine"}, mode="self")
    assert error.code.value == "conflict"
    assert "owned by 'alice'" in error.message
    assert board.path.read_bytes() == before
    reply = await board.call("administer-task", READER, {"taskId": "mine", "status": "done"})
    assert reply["status"] == "done"  # the operator acts as tower, who may change any task
    assert board.events()[-1]["by"] == "tower"
    assert len(board.path.read_bytes()) > len(before)


async def test_budget_and_dependency_gating_refuse(board: Board) -> None:
    for n in range(49):  # with "late": the 50 open tasks tower-do allows
        board.agent(agent_event(f"t{n}", f"Task {n}", "pending", "main", 1000 + n))
    board.agent(agent_event("late", "Late", "pending", "main", 2000, dependsOn=["t1"]))
    await board.refresh()
    before = board.path.read_bytes()
    error = await refused(board, "create-task", READER, {"title": "One too many"})
    assert error.code.value == "resource-exhausted"
    error = await refused(board, "claim-task", WORKER, {"taskId": "late"}, mode="self")
    assert error.code.value == "failed-precondition"
    assert "t1" in error.message
    assert board.path.read_bytes() == before


async def test_drop_is_a_removal_and_a_lost_race_is_decided_again(board: Board) -> None:
    created = await board.call("create-task", READER, {"title": "Drop me"})
    key = created["taskId"]
    store = tower_of(board.endpoint).store
    # A peer appends after our last fold: the write folds again before it decides.
    board.agent(agent_event("peer", "Peer work", "pending", "alice", 5000))
    dropped = await board.call("administer-task", READER, {"taskId": key, "status": "dropped"})
    assert dropped["status"] == "dropped"
    last = board.events()[-1]
    assert (last["op"], last["key"], last["by"]) == ("remove", key, "tower")
    assert "peer" in store.board.fold.tasks


async def test_a_page_of_records_and_the_sync_state_come_from_the_mirror(board: Board) -> None:
    store = board.endpoint.store
    assert await store.sync_state() is not None
    board.agent(agent_event("a", "A", "pending", "main", 1000, description="Do A."))
    board.agent(agent_event("b", "B", "pending", "main", 1001))
    await board.refresh()
    synced = await store.sync_state()
    assert synced is not None
    assert synced.last_success_ms is not None
    assert synced.failing is None
    page = await store.page_records(PageQuery(limit=1, statuses=frozenset({"open"})))
    assert [t.taskId for t in page.tasks] == ["a"]
    assert page.more is True
    assert page.tasks[0] == (await store.get("a")).task
    assert page.tasks[0].brief == "Do A."
    board.path.rename(board.path.with_suffix(".bak"))
    board.path.mkdir()
    with pytest.raises(ContractError):
        await board.refresh()
    failing = await store.sync_state()
    assert failing is not None
    assert failing.failing is not None
    assert failing.last_success_ms == synced.last_success_ms


async def test_an_unreadable_board_reads_stale_not_empty(board: Board) -> None:
    board.agent(agent_event("a", "A", "pending", "main", 1000))
    await board.refresh()
    board.path.rename(board.path.with_suffix(".bak"))
    board.path.mkdir()  # unreadable as a file, even for root
    with pytest.raises(ContractError) as caught:
        await board.refresh()
    assert caught.value.code.value == "unavailable"
    page = await board.call("list-tasks", READER, {})
    assert [t["taskId"] for t in page["tasks"]] == ["a"]
    assert "cannot be read" in page["stale"]["reason"]


async def test_a_concurrent_tower_do_writer_and_the_endpoint_share_one_log(board: Board) -> None:
    """A peer process appends under tower-do's lease while the endpoint writes: nobody
    writes inside the other's lease, every line stays whole, and each side reads the
    other's tasks."""
    peer = Path(__file__).parent / "peer.py"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(peer),
        str(board.path),
        "40",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    ours = []
    for n in range(25):
        ours.append((await board.call("create-task", READER, {"title": f"Ours {n}"}))["taskId"])
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary == {"written": 40, "inside_moves": 0}
    fold = fold_text(board.path.read_text("utf-8"))
    assert fold.skipped == 0
    assert fold.revision == 65
    assert {f"peer-{n}" for n in range(40)} | set(ours) == set(fold.tasks)
    await board.refresh()
    page = await board.call("list-tasks", READER, {"limit": 100})
    assert {t["taskId"] for t in page["tasks"]} == set(fold.tasks)


def live_record(board: Board, identity: str, at: int) -> None:
    live = board.path.parent / "live"
    live.mkdir(exist_ok=True)
    (live / f"{identity}.s1.json").write_text(json.dumps({"identity": identity, "at": at}))


async def test_a_stale_claim_is_adopted_and_a_live_one_is_not(board: Board) -> None:
    now = tower_of(board.endpoint).store.clock()
    old = now - 7 * 3_600_000  # quiet on the task for 7 h: past the 6 h window
    board.agent(
        agent_event("ghost-task", "Left behind", "in_progress", "ghost", old, owner="ghost")
    )
    board.agent(agent_event("busy-task", "Heads down", "in_progress", "busy", old, owner="busy"))
    await board.refresh()
    live_record(board, "busy", now)  # busy's process still heartbeats: never stale
    adopted = await board.call("claim-task", WORKER, {"taskId": "ghost-task"}, mode="self")
    assert adopted["status"] == "claimed"
    last = board.events()[-1]
    assert (last["by"], last["task"]["owner"], last["task"]["status"]) == (
        "coder-1",
        "coder-1",
        "in_progress",
    )
    error = await refused(board, "claim-task", WORKER, {"taskId": "busy-task"}, mode="self")
    assert error.code.value == "conflict"
    # A stalled row that was never started: adopted, then claimed, in two events.
    board.agent(agent_event("parked", "Parked", "pending", "ghost", old, owner="ghost"))
    await board.refresh()
    taken = await board.call("claim-task", WORKER, {"taskId": "parked"}, mode="self")
    assert taken["status"] == "claimed"
    adopt, edit = board.events()[-2:]
    assert (adopt["task"]["owner"], adopt["task"]["status"]) == ("coder-1", "pending")
    assert (edit["task"]["owner"], edit["task"]["status"]) == ("coder-1", "in_progress")


async def test_a_title_tower_do_cannot_hold_is_a_bad_request(board: Board) -> None:
    error = await refused(board, "create-task", READER, {"title": "x" * 161})
    assert error.code.value == "bad-request"
    assert "161 characters (max 160)" in error.message
    assert not board.path.exists() or board.path.read_text("utf-8") == ""


async def test_a_task_an_agent_changed_since_the_read_is_a_revision_conflict(
    board: Board,
) -> None:
    board.agent(agent_event("shared", "Shared", "pending", "main", 1000))
    await board.refresh()
    store = board.endpoint.store
    read = await store.get("shared")
    board.agent(agent_event("shared", "Shared, retitled", "pending", "main", 2000))
    before = board.path.read_bytes()
    done = Task.model_validate({**read.task.model_dump(), "status": "done"})
    with pytest.raises(RevisionConflict):
        await store.commit(Write(done, read.revision, "administer-task", "local.op/x"))
    assert board.path.read_bytes() == before  # nothing decided on the old row
    assert (await store.get("shared")).task.title == "Shared, retitled"
    # The command service re-reads and retries: the write lands on the current row.
    reply = await board.call("administer-task", READER, {"taskId": "shared", "status": "done"})
    assert (reply["status"], reply["title"]) == ("done", "Shared, retitled")


async def test_evidence_written_to_the_board_is_read_back_by_a_fresh_mirror(
    board: Board, tmp_path: Path
) -> None:
    created = await board.call("create-task", READER, {"title": "With evidence"})
    key = created["taskId"]
    await board.call("claim-task", WORKER, {"taskId": key}, mode="self")
    evidence = [{"kind": "commit", "ref": "9f2c1e7 ✓"}, {"kind": "review", "ref": "pr-12"}]
    await board.call(
        "update-task",
        WORKER,
        {"taskId": key, "evidence": evidence, "note": "Pushed."},
        mode="self",
    )
    (note,) = [e["message"] for e in board.events() if e["kind"] == "message"]
    assert note["body"] == "Pushed.\nevidence commit: 9f2c1e7 ✓\nevidence review: pr-12"
    # Another bridge, its own mirror, the same board file.
    endpoint = EndpointConfig(settings=TowerDoConfig(board=board.path, seats=SEATS))
    config = BridgeConfig(
        data_dir=tmp_path / "other", http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    async with open_endpoint(config, endpoint, serve=True) as other:
        record = await Client(other.service, other.store).call("get-task", READER, {"taskId": key})
    assert [(e["kind"], e["ref"]) for e in record["evidence"]] == [
        ("commit", "9f2c1e7 ✓"),
        ("review", "pr-12"),
    ]
    assert record["status"] == "open"  # no presence there: the invariant, not a guess


def test_a_waiting_writer_never_removes_a_live_holders_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's lease directory is left alone unless a token quiet past the stale
    bound was reaped from it. The race: the waiter lists the directory while one holder
    still has its token, that holder releases, and the next holder makes the directory
    again before it writes its token; an unconditional remove took the new holder's lease."""
    lock = tmp_path / "board.jsonl.lock"
    lock.mkdir()  # the next holder, between its mkdir and its token write
    monkeypatch.setattr(boardfile, "_entries", lambda _directory: ["released-token"])
    with Folder.opened(tmp_path) as folder:
        boardfile._reap(folder, lock.name)  # listed while the previous token was there
    assert lock.is_dir()
    monkeypatch.undo()
    stale = lock / "stale"
    stale.write_text("stale", encoding="utf-8")
    old = time.time() - boardfile.STALE_LOCK_S - 1
    os.utime(stale, (old, old))
    with Folder.opened(tmp_path) as folder:
        boardfile._reap(folder, lock.name)
    assert not lock.exists()
