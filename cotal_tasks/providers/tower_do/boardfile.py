"""The board file on disk: read as it grows, appended the way tower-do appends.

Reading is incremental: only complete lines past the last offset are folded; a partial
last line waits until its newline arrives. A file that was truncated, replaced (a
compaction renames a new file over the old one) or rewritten in place is folded again
from the start into a fresh view that replaces the old one whole, never half-applied.

The file is opened without following a link (``O_NOFOLLOW``) and must be a regular file,
for reads and appends alike: a board committed as a link to another file (a script) is
refused, never read or written through. A line longer than ``MAX_LINE_BYTES`` is skipped
and counted (``long_lines``, and the fold's ``skipped``), and never read again: the read
moves past it, so an unterminated 200 MiB line costs one pass, not one per poll. Reads
go in chunks, so memory stays bounded by the line limit whatever the file's size. A board
the bridge creates is private to its user (0600).

Writing takes tower-do's cross-process write lease (``<board>.lock``, a directory holding
one token file; a token quiet for 30 s is reaped), checks the file still ends where the
fold ended, and appends every line of the write in one ``O_APPEND`` ``write``. Releases
of tower-do without the lease ignore the directory; the end-of-file check still keeps a
decision from being made on a view that is no longer current.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from cotal_tasks.providers.tower_do.fold import Fold

log = logging.getLogger(__name__)

STALE_LOCK_S = 30.0
LOCK_WAIT_S = STALE_LOCK_S + 5.0
MAX_LINE_BYTES = 1 << 20  # a longer line (one event) is skipped and counted
_PROBE = 4096  # bytes of the file's head compared to notice an in-place rewrite
_CHUNK = 1 << 20  # bytes read at a time


class NotARegularFile(OSError):
    """The board path is a link, or not a regular file: refused, never followed."""


def _open_board(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` of the board itself: never through a link, and only a regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(
                errno.ELOOP,
                "it is a symbolic link, and the bridge never reads or writes a board through "
                "one. Point the endpoint's board at the file itself, or replace the link "
                "with the file",
            ) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(
            errno.EINVAL,
            "it is not a regular file. Point the endpoint's board at the board file",
        )
    return fd


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
    long_lines: int = 0  # lines over MAX_LINE_BYTES skipped, in this view
    _skipping: bool = False  # the offset is inside a long line being skipped

    def refresh(self) -> bool:
        """Fold what the file gained since the last read; ``True`` when the view changed.

        Raises ``OSError`` when the file exists but cannot be read, and
        ``NotARegularFile`` when the path is a link or not a regular file. A missing file
        is an empty board (tower-do reads it the same way)."""
        try:
            with os.fdopen(_open_board(self.path, os.O_RDONLY), "rb") as handle:
                info = os.fstat(handle.fileno())
                who = (info.st_dev, info.st_ino)
                head = handle.read(min(self.offset, _PROBE)) if self.offset else b""
                if who != self.identity or info.st_size < self.offset or head != self.head:
                    return self._rebuild(handle, who)
                handle.seek(self.offset)
                return self._consume(handle)
        except FileNotFoundError:
            if self.identity is None and self.offset == 0:
                return False
            self.fold, self.offset, self.identity, self.head = Fold(), 0, None, b""
            self.replaced += 1
            return True

    def _rebuild(self, handle: BinaryIO, who: tuple[int, int]) -> bool:
        handle.seek(0)
        fresh = BoardFile(self.path)
        fresh._consume(handle)
        if self.identity is not None:
            self.replaced += 1
        changed = self.identity is not None or fresh.offset != 0
        self.fold, self.offset, self.identity, self.head = fresh.fold, fresh.offset, who, fresh.head
        self.long_lines, self._skipping = fresh.long_lines, fresh._skipping
        return changed

    def _consume(self, handle: BinaryIO) -> bool:
        """Fold the complete lines from the handle's position (the offset) to its end, a
        chunk at a time; a partial last line waits for its newline, unless it is already
        too long, and then it is skipped."""
        changed = False
        pending = b""  # the start of a line not yet ended (at most MAX_LINE_BYTES)
        while chunk := handle.read(_CHUNK):
            data = pending + chunk
            if self._skipping:
                end = data.find(b"\n")
                if end < 0:
                    self._advance(data)  # still inside the long line: never read again
                    pending = b""
                    continue
                self._advance(data[: end + 1])
                self._skipping, data = False, data[end + 1 :]
            end = data.rfind(b"\n")
            if end >= 0:
                self._fold_lines(data[: end + 1])
                changed = True
            pending = data[end + 1 :]
            if len(pending) > MAX_LINE_BYTES:
                self._skip_line()
                self._advance(pending)
                self._skipping, pending, changed = True, b"", True
        return changed

    def _fold_lines(self, complete: bytes) -> None:
        lines = complete.split(b"\n")
        for raw in lines[:-1]:
            if len(raw) > MAX_LINE_BYTES:
                self._skip_line()
            else:
                self.fold.feed(raw.decode("utf-8", errors="replace"))
        self._advance(complete)

    def _skip_line(self) -> None:
        self.long_lines += 1
        self.fold.skipped += 1
        log.warning(
            "tower-do board %s: a line of more than %d bytes was skipped (%d so far); an "
            "event is one short JSON line",
            self.path,
            MAX_LINE_BYTES,
            self.long_lines,
        )

    def _advance(self, raw: bytes) -> None:
        if len(self.head) < _PROBE:  # the head is the file's first bytes, up to _PROBE
            self.head = (self.head + raw[:_PROBE])[:_PROBE]
        self.offset += len(raw)

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
        fd = _open_board(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            info = os.fstat(fd)
            if self.identity not in (None, (info.st_dev, info.st_ino)) or (
                info.st_size < self.offset
            ):
                raise BoardMoved(str(self.path))
            if info.st_size - self.offset > MAX_LINE_BYTES:
                raise BoardMoved(str(self.path))  # far behind the file: fold it first
            if info.st_size > self.offset:
                tail = os.pread(fd, info.st_size - self.offset, self.offset)
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
