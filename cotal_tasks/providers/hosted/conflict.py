"""The conflict rule: who wins when a person and a seat change one issue at once.

Pure. ``docs/github.md`` ("Two-way: who wins") has the table; in short, a person's
change on the tracker is never undone by the bridge, and a seat's write is never
silently dropped:

- the title and the labels the rules do not write are the tracker's: a person's edit
  always stands, and every reply shows it;
- the status, the brief and the seat's assignment are written by both sides: a seat's
  write that would change one a person changed since the mirror last read the issue is
  refused with ``conflict`` (``outcome: not-executed``, nothing written) and the mirror
  shows the person's change, so the seat decides again on what is really there;
- a note and evidence only add: both sides' always stand.
"""

from __future__ import annotations

from cotal_tasks.core import ContractError, ErrorCode, Task

# The fields a seat's write and a person's edit can both set, in the order messages name them.
CONTESTED = ("status", "brief", "assignee")


def _seat(task: Task) -> str | None:
    binding = task.binding
    return None if binding is None else f"{binding.owner}.{binding.actor}"


def _value(task: Task, name: str) -> object:
    if name == "status":
        return task.status
    if name == "brief":
        return task.brief
    return _seat(task)


def contested(old: Task, new: Task) -> tuple[str, ...]:
    """The contested fields a write from ``old`` to ``new`` changes."""
    return tuple(name for name in CONTESTED if _value(old, name) != _value(new, name))


def first_come(read: Task, new: Task, current: Task, tracker: str) -> ContractError | None:
    """The refusal of a write from ``read`` to ``new`` when the tracker now holds
    (``current``, as the mapping reads it) one of the contested fields the write changes
    otherwise than ``read``: a person changed it since. ``None``: the write goes ahead."""
    taken = [name for name in contested(read, new) if _value(read, name) != _value(current, name)]
    if not taken:
        return None
    now = f"{current.status}" + (f" ({current.statusSource})" if current.statusSource else "")
    return ContractError(
        ErrorCode.CONFLICT,
        f"{read.taskId} was changed on {tracker} since this write was decided: its "
        f"{' and '.join(taken)} changed, and it now reads {now}. Nothing was written; the "
        "task shows what the tracker holds. Read it again with get-task and decide again",
        outcome="not-executed",
    )
