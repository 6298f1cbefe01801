"""A second writer on a board file, doing what tower-do's disk layer does on each write,
in its own process: take the write lease (``<board>.lock``: mkdir, a token file, proven
exclusive), fold the log to its revision, gate on the ``baseRevision`` it read before,
append one line with ``O_APPEND``, release. Written independently of the provider under
test (it shares no code with it), so the two can check each other on one file.

Usage: ``python peer.py BOARD COUNT``; prints one JSON summary line.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path


def revision(path: Path) -> int:
    """Task events folded (a compact header is not written in this test)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    count = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        event = json.loads(line)  # every line must be whole JSON: a torn line fails here
        if event.get("kind") == "task" and event.get("op") in ("upsert", "remove"):
            count += 1
    return count


def lease(path: Path) -> tuple[Path, Path]:
    lock = Path(f"{path}.lock")
    token = uuid.uuid4().hex
    deadline = time.monotonic() + 35
    while time.monotonic() < deadline:
        try:
            lock.mkdir()
        except FileExistsError:
            time.sleep(0.002)
            continue
        (lock / token).write_text(token, encoding="utf-8")
        if os.listdir(lock) == [token]:
            return lock, lock / token
    raise SystemExit("lease timeout")


def main() -> None:
    path, count = Path(sys.argv[1]), int(sys.argv[2])
    inside_moves = 0
    for n in range(count):
        base = revision(path)  # what the agent read (tower_do_status)
        lock, token = lease(path)
        try:
            current = revision(path)  # the fold under the lease
            if current != base:
                base = current  # stale baseRevision: re-read and merge, as tower-do asks
            key = f"peer-{n}"
            at = int(time.time() * 1000)
            task = {
                "key": key,
                "subject": f"Peer task {n}",
                "status": "completed",
                "dependsOn": [],
                "blockedBy": [],
                "updatedAt": at,
            }
            line = (
                json.dumps(
                    {
                        "kind": "task",
                        "op": "upsert",
                        "key": key,
                        "task": task,
                        "by": "peer",
                        "at": at,
                    }
                )
                + "\n"
            )
            time.sleep(0.003)  # a decision takes time: nobody may write meanwhile
            if revision(path) != base:
                inside_moves += 1  # someone wrote inside our lease
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        finally:
            token.unlink()
            lock.rmdir()
    print(json.dumps({"written": count, "inside_moves": inside_moves}))


if __name__ == "__main__":
    main()
