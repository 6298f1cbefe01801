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
- a note and evidence only add: both sides' always stand;
- a person's close that lands while a seat's write that leaves the issue unfinished is on
  its way stands: the write takes back its own assignee and label, and the seat hears
  ``conflict`` (``outcome: executed``: its comment may remain).
"""

from __future__ import annotations

from cotal_tasks.core import ContractError, ErrorCode, Task, is_terminal

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


def closed_meanwhile(read: Task, new: Task, after: Task) -> ContractError | None:
    """A person closed the issue while a write that leaves it unfinished was on its way
    (``after``: the issue read back after the write): the refusal to answer once the
    write's own additions are taken back, or ``None``."""
    if is_terminal(after.status) and not is_terminal(new.status) and not is_terminal(read.status):
        source = f" ({after.statusSource})" if after.statusSource else ""
        return ContractError(
            ErrorCode.CONFLICT,
            f"{read.taskId} was closed on the tracker while this write was on its way: it "
            f"reads {after.status}{source}, and the write's assignee and label were taken "
            "back. Read it again with get-task and decide again",
            outcome="executed",
        )
    return None
