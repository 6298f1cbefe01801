"""A folder the bridge reads and writes but does not own: the tower-do board's folder,
where agents may put anything (a link, a FIFO, a device node, a directory with a million
entries).

Every entry is reached relative to the folder's open descriptor, never by a path walked
again, and never through a link (``O_NOFOLLOW``, ``follow_symlinks=False``): a name swapped
for a link between two steps is refused, not followed out of the folder. A file is
checked to be a regular file before it is opened for reading (``lstat``), opened
non-blocking (a FIFO that slipped in between answers at once instead of waiting for a
writer), and checked again on what was opened (``fstat``); a subfolder must be a real
directory. What is read is bounded: a small file by its byte cap, a listing by its entry
cap. The folder's own path is the operator's, from the config, and is opened as given.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = os.O_NOFOLLOW | _CLOEXEC


class NotARegularFile(OSError):
    """The entry is a link, or not a regular file: refused, never followed."""


class NotARealDirectory(OSError):
    """The entry is a link, or not a directory: refused, never listed or followed."""


class OverTheBound(OSError):
    """A file larger, or a listing longer, than its bound: refused before it is read."""


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (``a FIFO``)."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "of an unknown type"


class Folder:
    """An open directory; its entries are opened, listed and removed relative to it."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    @contextmanager
    def opened(cls, path: Path) -> Iterator[Folder]:
        """The operator's folder at ``path`` (a link to it is the operator's choice)."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            yield cls(fd, path)
        finally:
            os.close(fd)

    @contextmanager
    def sub(self, name: str) -> Iterator[Folder]:
        """The subfolder ``name``, which must be a real directory (not a link to one)."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._not_a_directory(name) from exc
            raise
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):  # pragma: no cover - O_DIRECTORY
                raise self._not_a_directory(name)
            yield Folder(fd, self.path / name)
        finally:
            os.close(fd)

    def _not_a_directory(self, name: str) -> NotARealDirectory:
        try:
            kind = kind_of(os.lstat(name, dir_fd=self.fd).st_mode)
        except OSError:
            kind = "not a directory"
        return NotARealDirectory(errno.ENOTDIR, f"it is {kind}, not a real directory")

    def lstat(self, name: str) -> os.stat_result:
        return os.lstat(name, dir_fd=self.fd)

    def entries(self, limit: int) -> list[str]:
        """The folder's entry names; ``OverTheBound`` past ``limit`` of them."""
        names: list[str] = []
        with os.scandir(self.fd) as listing:
            for entry in listing:
                names.append(entry.name)
                if len(names) > limit:
                    raise OverTheBound(errno.EFBIG, f"{self.path} holds more than {limit} entries")
        return names

    def open_file(self, name: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor on the regular file ``name``, opened without following a link and
        without blocking on a FIFO. For a plain read the entry's type is checked first,
        so nothing but a regular file is ever opened for reading."""
        if not flags & os.O_CREAT:
            info = self.lstat(name)
            if not stat.S_ISREG(info.st_mode):
                raise self._not_a_file(info.st_mode)
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._not_a_file(stat.S_IFLNK) from exc
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise self._not_a_file(info.st_mode)
        os.set_blocking(fd, True)  # a regular file: reads never wait on a writer
        return fd

    @staticmethod
    def _not_a_file(mode: int) -> NotARegularFile:
        return NotARegularFile(errno.EINVAL, f"it is {kind_of(mode)}, not a regular file")

    def read_small(self, name: str, cap: int) -> bytes:
        """The whole of the regular file ``name``, at most ``cap`` bytes
        (``OverTheBound`` past it, read no further)."""
        fd = self.open_file(name, os.O_RDONLY)
        try:
            data = os.read(fd, cap + 1)
        finally:
            os.close(fd)
        if len(data) > cap:
            raise OverTheBound(errno.EFBIG, f"{self.path / name} is over {cap} bytes")
        return data

    def write_new(self, name: str, data: bytes) -> None:
        """Create ``name`` (it must not exist) holding ``data``, private to this user."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=self.fd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def mkdir(self, name: str) -> None:
        """Make the directory ``name`` with the default mode, as tower-do makes its lease
        (a peer of another user can still reap a token in it)."""
        os.mkdir(name, dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        """Remove the entry ``name`` itself (a link is removed, never its target)."""
        os.unlink(name, dir_fd=self.fd)

    def rmdir(self, name: str) -> None:
        """Remove the empty directory ``name`` (a link or a non-empty one is refused)."""
        os.rmdir(name, dir_fd=self.fd)
