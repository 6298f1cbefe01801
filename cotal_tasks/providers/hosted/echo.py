"""The bridge's own echo, recognised by what it says.

A write records, before it calls the tracker, what it makes the issue say as the
mapping reads it back (``content_of`` the record it writes). A tracker snapshot read
while that write is in flight, or before it was mirrored, is the write's echo only when
it says exactly that; anything else may hold a person's edit and is read again once the
write has settled (``deferred``), never skipped for good.

Pure.
"""

from __future__ import annotations

import json

from cotal_tasks.core import Task


def content_of(task: Task) -> str:
    """What of ``task`` a tracker write sets and the mapping reads back: the title, the
    brief, the status and the seat it is bound to (its principal)."""
    binding = task.binding
    seat = f"{binding.owner}.{binding.actor}" if binding is not None else None
    return json.dumps(
        [task.title, task.brief, task.status, seat], ensure_ascii=False, separators=(",", ":")
    )


def is_echo(snapshot: Task, sent: frozenset[str]) -> bool:
    """Whether ``snapshot`` says exactly what one of the writes in flight sent."""
    return content_of(snapshot) in sent
