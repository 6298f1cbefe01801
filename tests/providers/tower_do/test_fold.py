"""The fold of tower-do board logs, and following a file as it grows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cotal_tasks.providers.tower_do.boardfile import BoardFile, BoardMoved, LeaseTimeout
from cotal_tasks.providers.tower_do.config import board_file_for, state_dir_name
from cotal_tasks.providers.tower_do.fold import fold_text, is_blocked

FIXTURES = Path(__file__).parent / "fixtures"


def test_legacy_log_folds_tasks_only_and_counts_task_events() -> None:
    fold = fold_text((FIXTURES / "legacy.jsonl").read_text(encoding="utf-8"))
    assert fold.revision == 7  # messages and findings never count
    assert fold.skipped == 1  # the line that is not JSON
    assert sorted(fold.tasks) == ["auth-refactor", "docs", "gemm"]
    assert fold.removed == {"old-task"}
    gemm = fold.tasks["gemm"]
    assert (gemm.status, gemm.owner, gemm.changed_files) == (
        "completed",
        "coder-1",
        ("src/gemm.c",),
    )
    assert is_blocked(fold.tasks["auth-refactor"], fold.tasks)  # a blockedBy entry
    assert not is_blocked(fold.tasks["docs"], fold.tasks)  # its dependency is completed
    assert fold.activity[("coder-2", "auth-refactor")] == 1764500008000


def test_compacted_log_takes_the_header_revision_and_counts_after_the_snapshot() -> None:
    fold = fold_text((FIXTURES / "compacted.jsonl").read_text(encoding="utf-8"))
    assert fold.revision == 9  # 7 from the header, 2 events after the 5 snapshot lines
    assert sorted(fold.tasks) == ["docs", "gemm"]
    assert fold.tasks["docs"].owner == "writer"
    assert fold.skipped == 0


def test_a_row_tower_do_would_refuse_is_skipped_not_folded() -> None:
    long = "x" * 161
    lines = [
        {
            "kind": "task",
            "op": "upsert",
            "key": "a",
            "task": {"key": "a", "subject": long, "status": "pending"},
            "by": "m",
            "at": 1,
        },
        {
            "kind": "task",
            "op": "upsert",
            "key": "b",
            "task": {"key": "b", "subject": "ok", "status": "weird"},
            "by": "m",
            "at": 1,
        },
        {
            "kind": "task",
            "op": "upsert",
            "key": "c",
            "task": {"key": "c", "subject": "ok", "status": "pending"},
            "by": "m",
        },  # no `at`: the current fold skips it
        {
            "kind": "task",
            "op": "upsert",
            "key": "d",
            "task": {"key": "d", "subject": "fine", "status": "pending"},
            "by": "m",
            "at": 1,
        },
    ]
    fold = fold_text("\n".join(json.dumps(line) for line in lines))
    assert (sorted(fold.tasks), fold.revision, fold.skipped) == (["d"], 1, 3)


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "board.jsonl"
    event = json.dumps(
        {
            "kind": "task",
            "op": "upsert",
            "key": "a",
            "task": {"key": "a", "subject": "A", "status": "pending"},
            "by": "m",
            "at": 5,
        }
    )
    path.write_text(event[:30], encoding="utf-8")
    board = BoardFile(path)
    board.refresh()
    assert (board.fold.tasks, board.fold.skipped, board.offset) == ({}, 0, 0)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(event[30:] + "\n")
    assert board.refresh()
    assert list(board.fold.tasks) == ["a"]
    assert board.fold.revision == 1


def test_a_truncated_or_replaced_file_is_folded_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "board.jsonl"
    legacy = (FIXTURES / "legacy.jsonl").read_text(encoding="utf-8")
    path.write_text(legacy, encoding="utf-8")
    board = BoardFile(path)
    board.refresh()
    assert board.fold.revision == 7
    # A compaction renames a new file over the old one.
    fresh = tmp_path / "board.jsonl.tmp"
    fresh.write_text((FIXTURES / "compacted.jsonl").read_text(encoding="utf-8"), "utf-8")
    os.replace(fresh, path)
    assert board.refresh()
    assert (board.fold.revision, sorted(board.fold.tasks), board.replaced) == (
        9,
        ["docs", "gemm"],
        1,
    )
    # Truncated in place: a fresh, empty view, not a half-applied one.
    path.write_text("", encoding="utf-8")
    assert board.refresh()
    assert (board.fold.revision, board.fold.tasks) == (0, {})


def test_an_append_on_a_view_that_is_no_longer_current_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "board.jsonl"
    path.write_text((FIXTURES / "legacy.jsonl").read_text(encoding="utf-8"), "utf-8")
    board = BoardFile(path)
    board.refresh()
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"kind":"task","op":"remove","key":"docs","by":"x","at":9}\n')
    before = path.read_bytes()
    try:
        with board.lease():
            board.append([{"kind": "task", "op": "remove", "key": "gemm", "by": "y", "at": 9}])
    except BoardMoved:
        pass
    else:
        raise AssertionError("appended on a stale view")
    assert path.read_bytes() == before
    assert not Path(f"{path}.lock").exists()  # the lease is released


def test_the_board_file_is_found_as_tower_do_finds_it(tmp_path: Path) -> None:
    project = tmp_path / "work" / "my repo"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    home = tmp_path / "home"
    found = board_file_for(project / "src", home)
    name = state_dir_name(project)
    assert name.startswith(str(project).replace("/", "-").replace(" ", "-").strip("-") + "-")
    assert found == home / ".pi" / "tower-do" / name / "board.jsonl"
    # Only a legacy board in the project: that one.
    legacy = project / ".pi" / "tower-do" / "board.jsonl"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("", encoding="utf-8")
    assert board_file_for(project, home) == legacy


def test_a_lease_a_crashed_writer_left_is_reaped(tmp_path: Path) -> None:
    path = tmp_path / "board.jsonl"
    board = BoardFile(path)
    lock = Path(f"{path}.lock")
    lock.mkdir()
    token = lock / "0123456789abcdef"
    token.write_text("dead", encoding="utf-8")
    old = time.time() - 60  # no heartbeat for a minute: past tower-do's 30 s
    os.utime(token, (old, old))
    with board.lease():
        assert os.listdir(lock) != ["0123456789abcdef"]
        board.append([{"kind": "task", "op": "remove", "key": "x", "by": "y", "at": 1}])
    assert not lock.exists()
    assert fold_text(path.read_text(encoding="utf-8")).revision == 1


def test_a_lease_taken_over_mid_write_stops_the_append(tmp_path: Path) -> None:
    path = tmp_path / "board.jsonl"
    board = BoardFile(path)
    with board.lease():
        lock = Path(f"{path}.lock")
        for name in os.listdir(lock):  # a peer reaps our token and takes the lease
            (lock / name).unlink()
        (lock / "peer-token").write_text("peer", encoding="utf-8")
        with pytest.raises(LeaseTimeout):
            board.append([{"kind": "task", "op": "remove", "key": "x", "by": "y", "at": 1}])
    assert not path.exists() or path.read_bytes() == b""
    assert os.listdir(lock) == ["peer-token"]  # the peer's lease is left alone
