"""The board file on disk: read as it grows, appended the way tower-do appends.

Reading is incremental: only complete lines past the last offset are folded; a partial
last line waits until its newline arrives. A file that was truncated, replaced (a
compaction renames a new file over the old one) or rewritten in place is folded again
from the start into a fresh view that replaces the old one whole, never half-applied.

Writing takes tower-do's cross-process write lease (``<board>.lock``, a directory holding
one token file; a token quiet for 30 s is reaped), checks the file still ends where the
fold ended, and appends every line of the write in one ``O_APPEND`` ``write``. Releases
of tower-do without the lease ignore the directory; the end-of-file check still keeps a
decision from being made on a view that is no longer current.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotal_tasks.providers.tower_do.fold import Fold

STALE_LOCK_S = 30.0
LOCK_WAIT_S = STALE_LOCK_S + 5.0
_PROBE = 4096  # bytes of the file's head compared to notice an in-place rewrite


class BoardMoved(Exception):
    """The file changed between the fold and the append: fold again and decide again."""


class LeaseTimeout(Exception):
    """Another writer held the lease for longer than tower-do's own wait."""


@dataclass
class BoardFile:
    """One board file and the fold of what has been read of it."""

    path: Path
    fold: Fold = field(default_factory=Fold)
    offset: int = 0  # bytes folded (always at a line end)
    identity: tuple[int, int] | None = None  # (device, inode) of the file folded
    head: bytes = b""  # the first bytes folded, to notice a rewrite in place
    replaced: int = 0  # how many times the view was rebuilt from the start
    held: Path | None = None  # the token file of the lease held, if any

    def refresh(self) -> bool:
        """Fold what the file gained since the last read; ``True`` when the view changed.

        Raises ``OSError`` when the file exists but cannot be read. A missing file is an
        empty board (tower-do reads it the same way)."""
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                who = (stat.st_dev, stat.st_ino)
                head = handle.read(min(self.offset, _PROBE)) if self.offset else b""
                if who != self.identity or stat.st_size < self.offset or head != self.head:
                    return self._rebuild(handle, who)
                handle.seek(self.offset)
                return self._feed(handle.read())
        except FileNotFoundError:
            if self.identity is None and self.offset == 0:
                return False
            self.fold, self.offset, self.identity, self.head = Fold(), 0, None, b""
            self.replaced += 1
            return True

    def _rebuild(self, handle: Any, who: tuple[int, int]) -> bool:
        handle.seek(0)
        data = handle.read()
        fresh = BoardFile(self.path)
        fresh._feed(data)
        if self.identity is not None:
            self.replaced += 1
        changed = self.identity is not None or fresh.offset != 0
        self.fold, self.offset, self.identity, self.head = fresh.fold, fresh.offset, who, fresh.head
        return changed

    def _feed(self, data: bytes) -> bool:
        end = data.rfind(b"\n")
        if end < 0:
            return False  # nothing complete yet: a partial line waits for its newline
        complete = data[: end + 1]
        for line in complete.decode("utf-8", errors="replace").split("\n"):
            self.fold.feed(line)
        if len(self.head) < _PROBE:  # the head is the file's first bytes, up to _PROBE
            self.head = (self.head + complete)[:_PROBE]
        self.offset += len(complete)
        return True

    def append(self, events: list[dict[str, Any]]) -> None:
        """Append ``events`` (one JSON line each) if the file still ends where the fold
        ended; raise ``BoardMoved`` otherwise. Call under ``lease()``."""
        payload = "".join(
            json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events
        ).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.held is not None and _entries(self.held.parent) != [self.held.name]:
            # A peer judged this holder dead and took the lease: never write beside it.
            raise LeaseTimeout(f"the write lease on {self.path} was taken over. Retry")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            stat = os.fstat(fd)
            if self.identity not in (None, (stat.st_dev, stat.st_ino)) or (
                stat.st_size < self.offset
            ):
                raise BoardMoved(str(self.path))
            if stat.st_size > self.offset:
                with self.path.open("rb") as handle:
                    handle.seek(self.offset)
                    tail = handle.read()
                if b"\n" in tail:
                    raise BoardMoved(str(self.path))  # complete lines the fold has not seen
                payload = b"\n" + payload  # a torn last line: end it, never glue onto it
            written = os.write(fd, payload)
            if written != len(payload):  # a short write: finish it, the line must be whole
                os.write(fd, payload[written:])
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def lease(self) -> Iterator[None]:
        """tower-do's write lease for the duration of a fold-decide-append."""
        lock = Path(f"{self.path}.lock")
        token = secrets.token_hex(16)
        deadline = time.monotonic() + LOCK_WAIT_S
        self.path.parent.mkdir(parents=True, exist_ok=True)
        held = False
        while not held:
            if time.monotonic() > deadline:
                raise LeaseTimeout(str(lock))
            try:
                lock.mkdir()
            except FileExistsError:
                _reap(lock)
                time.sleep(0.025)
                continue
            except PermissionError:
                break  # a read-only directory: append unlocked, as tower-do does
            try:
                (lock / token).write_text(token, encoding="utf-8")
            except FileNotFoundError:
                continue  # reaped between mkdir and the token write: try again
            held = _entries(lock) == [token]
            if not held:
                with contextlib.suppress(OSError):
                    (lock / token).unlink()
        self.held = lock / token if held else None
        try:
            yield
        finally:
            self.held = None
            if held:
                with contextlib.suppress(OSError):
                    (lock / token).unlink()
                with contextlib.suppress(OSError):
                    lock.rmdir()


def _entries(lock: Path) -> list[str] | None:
    try:
        return os.listdir(lock)
    except OSError:
        return None


def _reap(lock: Path) -> None:
    """Remove token files that stopped heartbeating, then the directory if empty."""
    now = time.time()
    entries = _entries(lock)
    if entries is None:
        return
    if not entries:
        with contextlib.suppress(OSError):
            if now - lock.stat().st_mtime > STALE_LOCK_S:
                lock.rmdir()
        return
    reaped = False
    for name in entries:
        with contextlib.suppress(OSError):
            if now - (lock / name).stat().st_mtime > STALE_LOCK_S:
                (lock / name).unlink()
                reaped = True
    if reaped:  # never remove a live holder's directory, not even one between its steps
        with contextlib.suppress(OSError):
            lock.rmdir()


def live_owners(board: Path, now: int, window_ms: int) -> set[str] | None:
    """Identities with a fresh record in tower-do's liveness sidecar beside the board
    (``live/<identity>.<session>.json``, aliases included); ``None`` when the records
    cannot be read, and then no claim may go stale (tower-do's strict reading)."""
    owners: set[str] = set()
    try:
        paths = [p for p in (board.parent / "live").iterdir() if p.name.endswith(".json")]
    except OSError:
        return None
    for path in paths:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("identity"), str):
            continue
        at = record.get("at")
        if not isinstance(at, int | float) or at < now - window_ms:
            continue
        owners.add(record["identity"])
        aliases = record.get("aliases")
        if isinstance(aliases, list):
            owners.update(a for a in aliases if isinstance(a, str))
    return owners
