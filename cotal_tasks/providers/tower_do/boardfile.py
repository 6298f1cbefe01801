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
from cotal_tasks.providers.tower_do.folder import (
    Folder,
    NotARealDirectory,
    NotARegularFile,
    OverTheBound,
    kind_of,
)

log = logging.getLogger(__name__)

STALE_LOCK_S = 30.0
LOCK_WAIT_S = STALE_LOCK_S + 5.0
MAX_LINE_BYTES = 1 << 20  # a longer line (one event) is skipped and counted
_PROBE = 4096  # bytes of the file's head compared to notice an in-place rewrite
_CHUNK = 1 << 20  # bytes read at a time


MAX_BOARD_BYTES = 512 << 20  # tower-do itself reads the board whole into one string
MAX_LOCK_ENTRIES = 64  # a lease holds one token; a few orphans at most
MAX_LIVE_RECORDS = 1024  # liveness records listed; past it none is trusted
MAX_LIVE_RECORD_BYTES = 64 << 10  # one liveness record (a few short fields)


@contextlib.contextmanager
def _board_fd(path: Path, flags: int) -> Iterator[int]:
    """The board itself, opened in its folder without following a link or blocking on a
    FIFO, and only if it is a regular file within ``MAX_BOARD_BYTES``."""
    with Folder.opened(path.parent) as folder:
        try:
            fd = folder.open_file(path.name, flags)
        except NotARegularFile as exc:
            raise NotARegularFile(
                exc.errno,
                f"{exc.strerror}, and the bridge reads and writes a board only as a regular "
                "file, never through a link. Point the endpoint's board at the file itself, "
                "or replace it with the file",
            ) from exc
        try:
            if os.fstat(fd).st_size > MAX_BOARD_BYTES:
                raise OverTheBound(
                    errno.EFBIG,
                    f"it is over {MAX_BOARD_BYTES >> 20} MiB, more than tower-do itself reads. "
                    "Compact it with tower-do",
                )
            yield fd
        finally:
            os.close(fd)


class LockNotADirectory(Exception):
    """``<board>.lock`` is not a real directory: never listed, reaped or followed."""

    def __init__(self, lock: Path, why: str) -> None:
        super().__init__(
            f"{lock} is not tower-do's write lease ({why}; the lease is a directory holding "
            f"one token file), so the bridge neither lists nor removes anything through it. "
            f"Remove it (rm {lock}) and retry; tower-do makes the lease again on its next write"
        )


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
    held: tuple[Folder, str] | None = None  # the lease held: its directory and token
    long_lines: int = 0  # lines over MAX_LINE_BYTES skipped, in this view
    _skipping: bool = False  # the offset is inside a long line being skipped

    def refresh(self) -> bool:
        """Fold what the file gained since the last read; ``True`` when the view changed.

        Raises ``OSError`` when the file exists but cannot be read, and
        ``NotARegularFile`` when the path is a link or not a regular file. A missing file
        is an empty board (tower-do reads it the same way)."""
        try:
            with (
                _board_fd(self.path, os.O_RDONLY) as fd,
                os.fdopen(fd, "rb", closefd=False) as handle,
            ):
                info = os.fstat(fd)
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
        if self.held is not None and _entries(self.held[0]) != [self.held[1]]:
            # A peer judged this holder dead and took the lease: never write beside it.
            raise LeaseTimeout(f"the write lease on {self.path} was taken over. Retry")
        with _board_fd(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT) as fd:
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

    @contextlib.contextmanager
    def lease(self) -> Iterator[None]:
        """tower-do's write lease for the duration of a fold-decide-append. Every step
        goes through the board folder's descriptor and the lease directory's own, so a
        lock swapped for a link is refused (``LockNotADirectory``), never followed."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with Folder.opened(self.path.parent) as folder:
            lock = f"{self.path.name}.lock"
            with _acquired(folder, lock) as held:
                self.held = held
                try:
                    yield
                finally:
                    self.held = None


@contextlib.contextmanager
def _acquired(folder: Folder, lock: str) -> Iterator[tuple[Folder, str] | None]:
    """Take the lease ``lock`` in ``folder`` as tower-do takes it: ``mkdir``, a token file
    inside, proven exclusive (a reaper may have replaced the directory in between). Yields
    the directory and token held, or ``None`` where the folder is read-only (the append
    then goes unlocked, as tower-do's does); releases only its own token."""
    token = secrets.token_hex(16)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        if time.monotonic() > deadline:
            raise LeaseTimeout(str(folder.path / lock))
        try:
            folder.mkdir(lock)
        except FileExistsError:
            _reap(folder, lock)
            time.sleep(0.025)
            continue
        except PermissionError:
            yield None  # a read-only directory: append unlocked, as tower-do does
            return
        with contextlib.ExitStack() as stack:
            try:
                directory = stack.enter_context(folder.sub(lock))
                directory.write_new(token, token.encode())
            except FileNotFoundError:
                continue  # reaped between mkdir and the token write: try again
            except NotARealDirectory as exc:  # swapped for a link since the mkdir
                raise LockNotADirectory(folder.path / lock, exc.strerror or "") from exc
            if _entries(directory) == [token]:
                try:
                    yield directory, token
                finally:
                    with contextlib.suppress(OSError):
                        directory.unlink(token)
                    with contextlib.suppress(OSError):
                        folder.rmdir(lock)  # refused while a peer's token is in it
                return
            with contextlib.suppress(OSError):  # a peer's directory: drop the orphan
                directory.unlink(token)


def _entries(directory: Folder) -> list[str] | None:
    """The lease directory's token names; ``None`` when they cannot be listed."""
    try:
        return directory.entries(MAX_LOCK_ENTRIES)
    except OverTheBound as exc:
        raise LockNotADirectory(
            directory.path, f"it holds more than {MAX_LOCK_ENTRIES} entries"
        ) from exc
    except OSError:
        return None


def _reap(folder: Folder, lock: str) -> None:
    """Remove token files that stopped heartbeating, then the directory if empty. A lock
    that is not a real directory is refused, never listed or followed."""
    now = time.time()
    try:
        info = folder.lstat(lock)
    except FileNotFoundError:
        return  # released meanwhile
    if not stat.S_ISDIR(info.st_mode):
        raise LockNotADirectory(folder.path / lock, f"it is {kind_of(info.st_mode)}")
    try:
        with folder.sub(lock) as directory:
            entries = _entries(directory)
            if entries is None:
                return
            if not entries:
                with contextlib.suppress(OSError):
                    if now - os.fstat(directory.fd).st_mtime > STALE_LOCK_S:
                        folder.rmdir(lock)
                return
            reaped = False
            for name in entries:
                with contextlib.suppress(OSError):
                    if now - directory.lstat(name).st_mtime > STALE_LOCK_S:
                        directory.unlink(name)
                        reaped = True
    except FileNotFoundError:
        return
    except NotARealDirectory as exc:  # swapped for a link since the lstat
        raise LockNotADirectory(folder.path / lock, exc.strerror or "") from exc
    if reaped:  # never remove a live holder's directory, not even one between its steps
        with contextlib.suppress(OSError):
            folder.rmdir(lock)


def live_owners(board: Path, now: int, window_ms: int) -> set[str] | None:
    """Identities with a fresh record in tower-do's liveness sidecar beside the board
    (``live/<identity>.<session>.json``, aliases included); ``None`` when the records
    cannot be read, and then no claim may go stale (tower-do's strict reading).

    ``live`` must be a real directory of at most ``MAX_LIVE_RECORDS`` entries; a record
    that is a link, a FIFO, a device or over ``MAX_LIVE_RECORD_BYTES`` is skipped unread."""
    owners: set[str] = set()
    try:
        with Folder.opened(board.parent) as folder, folder.sub("live") as live:
            names = [n for n in live.entries(MAX_LIVE_RECORDS) if n.endswith(".json")]
            records = [_live_record(live, name) for name in names]
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("tower-do liveness records beside %s not read: %s", board, exc)
        return None
    for record in records:
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


def _live_record(live: Folder, name: str) -> object:
    try:
        return json.loads(live.read_small(name, MAX_LIVE_RECORD_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
