"""Task ids of tracker issues: ``path#number``, within the record's 128-byte bound.

A repository path fits as it is in almost every case (``acme/widgets#12``). A path too
long for the bound (a GitLab project deep in subgroups, a GitHub owner and repository at
their longest) keeps its readable head and ends in ``~`` and a digest of the whole path,
so every legal path has a stable id that parses back: the endpoint computes the same
prefix from its configured path and compares.
"""

from __future__ import annotations

import hashlib

TASK_ID_BYTES = 128
NUMBER_DIGITS = 19  # room for any issue number a tracker hands out
DIGEST_CHARS = 16
PREFIX_BYTES = TASK_ID_BYTES - 1 - NUMBER_DIGITS  # the path part, with "#" and the number


def id_prefix(path: str) -> str:
    """The part of a task id before ``#``: the path, or its head plus a digest."""
    data = path.encode("utf-8")
    if len(data) <= PREFIX_BYTES:
        return path
    digest = hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]
    head = data[: PREFIX_BYTES - 1 - DIGEST_CHARS].decode("utf-8", errors="ignore")
    return f"{head}~{digest}"


def task_id(path: str, number: int) -> str:
    return f"{id_prefix(path)}#{number}"


def number_in(path: str, task: str) -> int | None:
    """The issue number of a task id of ``path``, or ``None`` for another project's task."""
    prefix = f"{id_prefix(path)}#"
    if not task.startswith(prefix):
        return None
    tail = task[len(prefix) :]
    if not (tail.isascii() and tail.isdigit()) or len(tail) > NUMBER_DIGITS:
        return None
    return int(tail)
