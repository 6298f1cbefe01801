"""What an agent may put in the board's folder, against a real endpoint on real files:
a lock that is a link (to a folder of files, or to nothing), a file, or a directory of
thousands of entries; a FIFO or a link to a device as the board or as a liveness record.
Nothing outside the folder is listed, read or removed; nothing blocks; an unreadable
board makes the endpoint stale and not ready, with a message naming the file."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.tower_do import boardfile
from cotal_tasks.providers.tower_do.boardfile import BoardFile
from tests.providers.tower_do._support import READER, WORKER, Board, agent_event

OLD = time.time() - boardfile.STALE_LOCK_S - 60  # older than any token the reap may take


def victim_folder(tmp_path: Path) -> Path:
    """A folder outside the board's, of files quiet for longer than the stale bound (an
    SSH key among them), which a reap through a linked lock would empty."""
    victim = tmp_path / "home" / ".ssh"
    victim.mkdir(parents=True)
    for name in ("id_ed25519", "authorized_keys", "config"):
        (victim / name).write_text(f"{name}\n", encoding="utf-8")
        os.utime(victim / name, (OLD, OLD))
    return victim


async def refused_write(board: Board) -> ContractError:
    with pytest.raises(ContractError) as caught:
        await asyncio.wait_for(board.call("create-task", READER, {"title": "Port it"}), 20)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert caught.value.outcome == "not-executed"
    return caught.value


async def test_a_lock_linked_to_another_folder_is_refused_and_nothing_there_removed(
    board: Board, tmp_path: Path
) -> None:
    """Before: the reap listed the linked folder, and unlinked every file in it."""
    victim = victim_folder(tmp_path)
    lock = Path(f"{board.path}.lock")
    lock.symlink_to(victim, target_is_directory=True)
    refusal = await refused_write(board)
    assert str(lock) in refusal.message
    assert "symbolic link" in refusal.message
    assert f"rm {lock}" in refusal.message  # the remedy
    assert sorted(p.name for p in victim.iterdir()) == ["authorized_keys", "config", "id_ed25519"]
    assert lock.is_symlink()  # refused, not removed either
    assert not board.path.exists() or "Port it" not in board.path.read_text("utf-8")


async def test_a_lock_that_is_a_file_or_a_dangling_link_is_refused(
    board: Board, tmp_path: Path
) -> None:
    lock = Path(f"{board.path}.lock")
    lock.write_text("legacy", encoding="utf-8")
    os.utime(lock, (OLD, OLD))
    refusal = await refused_write(board)
    assert "(it is a regular file;" in refusal.message
    assert lock.read_text("utf-8") == "legacy"
    lock.unlink()
    lock.symlink_to(tmp_path / "nowhere")
    refusal = await refused_write(board)
    assert "symbolic link" in refusal.message
    assert not (tmp_path / "nowhere").exists()
    lock.unlink()  # the operator's remedy: then the write lands
    created = await board.call("create-task", READER, {"title": "Port it"})
    assert created["status"] == "open"


async def test_a_lock_with_more_entries_than_a_lease_holds_is_refused(board: Board) -> None:
    lock = Path(f"{board.path}.lock")
    lock.mkdir()
    for n in range(boardfile.MAX_LOCK_ENTRIES + 1):
        (lock / f"t{n}").write_text("x", encoding="utf-8")
    refusal = await refused_write(board)
    assert f"more than {boardfile.MAX_LOCK_ENTRIES} entries" in refusal.message
    assert len(os.listdir(lock)) == boardfile.MAX_LOCK_ENTRIES + 1


def test_a_token_that_is_a_link_is_removed_itself_never_its_target(tmp_path: Path) -> None:
    victim = victim_folder(tmp_path)
    board = BoardFile(tmp_path / "project" / "board.jsonl")
    lock = Path(f"{board.path}.lock")
    lock.mkdir(parents=True)
    token = lock / "dead-holder"
    token.symlink_to(victim / "id_ed25519")
    os.utime(token, (OLD, OLD), follow_symlinks=False)
    with board.lease():
        assert "dead-holder" not in os.listdir(lock)
    assert (victim / "id_ed25519").read_text("utf-8") == "id_ed25519\n"


# Run in a child process with a deadline and an address-space cap, so a read that blocks
# on a FIFO or streams /dev/zero (the code before) fails the test instead of hanging it.
CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from pathlib import Path
from cotal_tasks.providers.tower_do.boardfile import BoardFile, live_owners
what, path = sys.argv[1], Path(sys.argv[2])
if what == "board":
    try:
        BoardFile(path).refresh()
        print(json.dumps({"read": True}))
    except OSError as exc:
        print(json.dumps({"refused": str(exc)}))
else:
    owners = live_owners(path, int(time.time() * 1000), 120_000)
    print(json.dumps({"owners": sorted(owners) if owners is not None else None}))
"""


def in_child(what: str, path: Path) -> dict[str, object]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, what, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {what} read did not return within 60 s (blocked on a FIFO?)")
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_a_board_that_is_a_fifo_or_a_device_link_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    """Before: opening a FIFO board for reading waited for a writer that never came."""
    path = tmp_path / "board.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    answer = in_child("board", path)
    assert "refused" in answer, answer
    assert ("a FIFO" if kind == "fifo" else "a symbolic link") in str(answer["refused"])
    assert "Point the endpoint's board at the file itself" in str(answer["refused"])


def test_liveness_records_that_are_fifos_links_or_huge_are_skipped_unread(
    tmp_path: Path,
) -> None:
    """Before: a FIFO in ``live/`` blocked the claim that read it, for as long as it had no
    writer; ``live/x.json -> /dev/zero`` grew one claim's memory without bound; a link
    was followed out of the folder."""
    board = tmp_path / "project" / "board.jsonl"
    live = board.parent / "live"
    live.mkdir(parents=True)
    now = int(time.time() * 1000)
    (live / "coder-1.s1.json").write_text(json.dumps({"identity": "coder-1", "at": now}))
    os.mkfifo(live / "a-fifo.s1.json")
    (live / "b-zero.s1.json").symlink_to("/dev/zero")
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"identity": "intruder", "at": now}))
    (live / "c-out.s1.json").symlink_to(outside)
    huge = {"identity": "huge", "at": now, "pad": "x" * (64 << 10)}  # over the 64 KiB bound
    (live / "d-huge.s1.json").write_text(json.dumps(huge))
    assert in_child("live", board) == {"owners": ["coder-1"]}
    assert boardfile.MAX_LIVE_RECORD_BYTES == 64 << 10


def test_a_live_folder_that_is_a_link_or_too_long_trusts_no_record(tmp_path: Path) -> None:
    """No claim may go stale on records that cannot be read as tower-do keeps them."""
    board = tmp_path / "project" / "board.jsonl"
    board.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (board.parent / "live").symlink_to(elsewhere, target_is_directory=True)
    now = int(time.time() * 1000)
    assert boardfile.live_owners(board, now, 120_000) is None
    (board.parent / "live").unlink()
    (board.parent / "live").mkdir()
    for n in range(boardfile.MAX_LIVE_RECORDS + 1):
        (board.parent / "live" / f"s{n}.json").write_text("{}")
    assert boardfile.live_owners(board, now, 120_000) is None


async def test_an_unreadable_board_makes_the_endpoint_stale_and_not_ready(board: Board) -> None:
    """Before: the follower waited on the FIFO for ever, and reads carried no ``stale``."""
    board.agent(agent_event("port", "Port the parser", "pending", "coder-1", 1_700_000_000_000))
    await board.refresh()
    board.path.unlink()
    os.mkfifo(board.path)
    with pytest.raises(ContractError) as caught:
        await asyncio.wait_for(board.refresh(), 10)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert "a FIFO" in caught.value.message
    store = board.endpoint.store
    stale = await store.freshness()
    assert stale is not None
    assert "a FIFO" in stale.reason
    state = await store.sync_state()
    assert state is not None
    assert state.refused  # /healthz: not ready, and notReady says why
    listed = await board.call("list-tasks", READER, {})
    assert "stale" in listed  # the mirror still answers, labelled
    with pytest.raises(ContractError) as claim:
        await asyncio.wait_for(
            board.call("claim-task", WORKER, {"taskId": "port"}, mode="self"), 10
        )
    assert claim.value.code is ErrorCode.UNAVAILABLE
    board.path.unlink()  # the remedy: the board a file again, and the endpoint recovers
    board.agent(agent_event("port", "Port the parser", "pending", "coder-1", 1_700_000_000_000))
    await board.refresh()
    assert await store.freshness() is None
