"""Plan the tracker write that makes an issue say what a new task record says.

Pure. The command service already decided the next record under the contract's rules;
this turns the difference between the old and the new record into tracker terms:
assignees (only for seats the directory maps to an account), the claimed/blocked
labels, closing with the right reason, the body, and one comment carrying the note and
any new evidence. Text goes out with its line structure as the tracker's line breaks
(``line_breaks``; the mapping reads it back through ``lines_kept``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from cotal_tasks.core import Task, TaskBinding, TaskStatus, is_terminal, line_breaks
from cotal_tasks.providers.hosted.tracker import NewIssue, TrackedIssue, TrackerChange


@dataclass(frozen=True, slots=True)
class WritePlan:
    """How a tracker says the statuses its open/closed state does not: by a label
    (``labels``: status -> label), and by a reason kept with the state (``reasons``:
    status -> the tracker's reason for closing as it, or for reopening as ``open``; empty:
    the tracker keeps no reason)."""

    labels: Mapping[TaskStatus, str] = field(default_factory=dict)
    reasons: Mapping[TaskStatus, str] = field(default_factory=dict)


def status_labels(**by_status: str | None) -> dict[TaskStatus, str]:
    """``labels`` for a ``WritePlan`` from the configured ones (``None``: no label)."""
    return {cast(TaskStatus, status): label for status, label in by_status.items() if label}


def _account(binding: TaskBinding | None, accounts: Mapping[str, str]) -> str | None:
    if binding is None:
        return None
    return accounts.get(f"{binding.owner}.{binding.actor}")


def accounts_of(seats: Mapping[str, str]) -> dict[str, str]:
    """The reverse directory: seat principal → tracker account."""
    return {principal: login for login, principal in seats.items()}


def plan_change(
    old: Task,
    new: Task,
    *,
    plan: WritePlan,
    seats: Mapping[str, str],
    note: str | None,
) -> TrackerChange:
    accounts = accounts_of(seats)
    before, after = _account(old.binding, accounts), _account(new.binding, accounts)
    assign = (after,) if after is not None and after != before else ()
    unassign = (before,) if before is not None and before != after else ()
    add: list[str] = []
    remove: list[str] = []
    for status, label in plan.labels.items():
        on = new.status == status
        if on != (old.status == status):
            (add if on else remove).append(label)
    state: Literal["open", "closed"] | None = None
    reason: str | None = None
    if is_terminal(new.status) and not is_terminal(old.status):
        state = "closed"
    elif not is_terminal(new.status) and is_terminal(old.status):
        state = "open"
        reason = plan.reasons.get("open")
    reclose = False
    if plan.reasons and new.status != old.status and is_terminal(new.status):
        state = "closed"
        reason = plan.reasons.get(new.status)
        reclose = is_terminal(old.status)
    added = [e for e in new.evidence if e not in old.evidence]
    lines = [line_breaks(note)] if note else []
    lines += [f"- {e.kind}: {e.ref}" for e in added]
    if added and note:
        lines.insert(1, "")
    comment = None
    if lines:
        comment = "\n".join(lines)
        if added and not note:
            comment = "Evidence:\n" + comment
    return TrackerChange(
        assign=assign,
        unassign=unassign,
        add_labels=tuple(add),
        remove_labels=tuple(remove),
        state=state,
        state_reason=reason,
        body=_written(new.brief) if new.brief != old.brief else None,
        comment=comment,
        reclose=reclose,
    )


def plan_new(task: Task, plan: WritePlan) -> tuple[NewIssue, TrackerChange]:
    """A ``create-task`` record as a new issue, plus the change that closes it if needed."""
    label = plan.labels.get(task.status) if is_terminal(task.status) else None
    labels = (label,) if label else ()
    follow = TrackerChange()
    if is_terminal(task.status):
        follow = TrackerChange(state="closed", state_reason=plan.reasons.get(task.status))
    lines = [f"- {e.kind}: {e.ref}" for e in task.evidence]
    if lines:
        follow = TrackerChange(
            state=follow.state,
            state_reason=follow.state_reason,
            comment="Evidence:\n" + "\n".join(lines),
        )
    return NewIssue(task.title, _written(task.brief), labels), follow


def _written(brief: str | None) -> str | None:
    """A brief as the tracker's own text: its line structure as line breaks."""
    return None if brief is None else line_breaks(brief)


# A tracker write carries a mark of its caller and envelope id, invisible when the tracker
# renders markdown, so a retry can tell whether an earlier attempt already took effect.
_MARK_PREFIX = "<!-- cotal-tasks:write "
_MARK = re.compile(r"\s*<!-- cotal-tasks:write [0-9a-f]{8,64} -->\s*$")


def with_marker(text: str | None, marker: str) -> str:
    """``text`` with the write's mark at its end."""
    mark = f"{_MARK_PREFIX}{marker} -->"
    return f"{text}\n\n{mark}" if text else mark


def strip_marker(text: str | None) -> str | None:
    """``text`` without a write's mark; ``None`` when nothing else was there."""
    if text is None:
        return None
    stripped = _MARK.sub("", text)
    return stripped if stripped else None


_FOUND = re.compile(r"<!-- cotal-tasks:write ([0-9a-f]{8,64}) -->")


def mark_in(text: object) -> str | None:
    """The write mark ``text`` carries (the last, if several), or ``None``."""
    if not isinstance(text, str) or _MARK_PREFIX not in text:
        return None
    found = _FOUND.findall(text)
    return found[-1] if found else None


def remaining(change: TrackerChange, issue: TrackedIssue, commented: bool) -> TrackerChange:
    """What of ``change`` the issue does not show yet: a retry applies only that.

    ``commented``: a comment carrying the write's mark is already on the issue.
    """
    held = set(issue.assignees)
    labels = {label.casefold() for label in issue.native.labels}
    closed = issue.native.state == "closed"
    state, reason, reclose = change.state, change.state_reason, change.reclose
    if state == "closed" and closed and (reason is None or issue.native.state_reason == reason):
        state, reason, reclose = None, None, False
    elif state == "open" and not closed:
        state, reason = None, None
    body = change.body
    if body is not None and strip_marker(issue.body) == body:
        body = None
    return TrackerChange(
        assign=tuple(a for a in change.assign if a not in held),
        unassign=tuple(a for a in change.unassign if a in held),
        add_labels=tuple(x for x in change.add_labels if x.casefold() not in labels),
        remove_labels=tuple(x for x in change.remove_labels if x.casefold() in labels),
        state=state,
        state_reason=reason,
        body=body,
        comment=None if commented else change.comment,
        reclose=reclose,
    )
