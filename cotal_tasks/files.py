"""Files the bridge creates are private to its user: directories 0700, files 0600.

The data directory holds the boards and mirrors (SQLite databases with their WAL and
shared-memory files, which SQLite creates with the database file's own mode), the
instance identities, the embedded broker's store, log and pid, and the broker's URL.
Under the usual umask 022 they would all be world-readable; so each is created with its
private mode, and the data directory (and a database file the bridge made before) is
narrowed to it when it is found wider.

It sits beside the layers, not in one: the board (a provider) and the bridge's wire and
process both create such files, and ``core`` stays free of I/O.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def _narrow(path: Path, mode: int) -> None:
    """Narrow ``path`` to ``mode`` when it is wider and this user owns it."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        return
    if stat.S_IMODE(info.st_mode) & ~mode:
        os.chmod(path, mode)
        log.info("%s was readable by others; narrowed it to %o", path, mode)


def private_dir(path: Path, *, narrow: bool = True) -> None:
    """Create ``path`` (and missing parents) 0700; narrow an existing ``path`` to 0700
    unless ``narrow`` is off (a directory the operator chose, beside other things)."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if narrow:
        _narrow(path, DIR_MODE)


def private_file(path: Path) -> None:
    """Make sure ``path`` exists and is 0600 (created empty when missing), before another
    library creates it with its own mode (SQLite: 0644 less the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    os.close(fd)
    _narrow(path, FILE_MODE)
    for companion in ("-wal", "-shm", "-journal"):
        _narrow(path.with_name(path.name + companion), FILE_MODE)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, the file 0600 whatever it was before."""
    fd = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
    )
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
