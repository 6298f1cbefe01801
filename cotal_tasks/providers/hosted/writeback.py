"""Plan the tracker write that makes an issue say what a new task record says.

Pure. The command service already decided the next record under the contract's rules;
this turns the difference between the old and the new record into tracker terms:
assignees (only for seats the directory maps to an account), the claimed/blocked
labels, closing with the right reason, the body, and one comment carrying the note and
any new evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cotal_tasks.core import Task, TaskBinding, is_terminal
from cotal_tasks.providers.hosted.tracker import NewIssue, TrackedIssue, TrackerChange


@dataclass(frozen=True, slots=True)
class WritePlan:
    """The labels a tracker uses for the statuses it has no native state for."""

    claimed_label: str | None
    blocked_label: str | None
    dropped_label: str | None = None  # GitLab has no close reason: a label says "dropped"
    close_reasons: bool = True  # GitHub's state_reason


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
    wanted = {
        plan.claimed_label: new.status == "claimed",
        plan.blocked_label: new.status == "blocked",
        plan.dropped_label: new.status == "dropped",
    }
    was = {
        plan.claimed_label: old.status == "claimed",
        plan.blocked_label: old.status == "blocked",
        plan.dropped_label: old.status == "dropped",
    }
    for label, on in wanted.items():
        if label is None or on == was[label]:
            continue
        (add if on else remove).append(label)
    state: Literal["open", "closed"] | None = None
    reason: Literal["completed", "not_planned", "reopened"] | None = None
    if is_terminal(new.status) and not is_terminal(old.status):
        state = "closed"
    elif not is_terminal(new.status) and is_terminal(old.status):
        state = "open"
        reason = "reopened" if plan.close_reasons else None
    reclose = False
    if plan.close_reasons and new.status != old.status and is_terminal(new.status):
        state = "closed"
        reason = "completed" if new.status == "done" else "not_planned"
        reclose = is_terminal(old.status)
    added = [e for e in new.evidence if e not in old.evidence]
    lines = [note] if note else []
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
        body=new.brief if new.brief != old.brief and new.brief is not None else None,
        comment=comment,
        reclose=reclose,
    )


def plan_new(task: Task, plan: WritePlan) -> tuple[NewIssue, TrackerChange]:
    """A ``create-task`` record as a new issue, plus the change that closes it if needed."""
    labels = (plan.dropped_label,) if task.status == "dropped" and plan.dropped_label else ()
    follow = TrackerChange()
    if is_terminal(task.status):
        follow = TrackerChange(
            state="closed",
            state_reason=(
                ("completed" if task.status == "done" else "not_planned")
                if plan.close_reasons
                else None
            ),
        )
    lines = [f"- {e.kind}: {e.ref}" for e in task.evidence]
    if lines:
        follow = TrackerChange(
            state=follow.state,
            state_reason=follow.state_reason,
            comment="Evidence:\n" + "\n".join(lines),
        )
    return NewIssue(task.title, task.brief, labels), follow


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


def carries_marker(text: str | None, marker: str) -> bool:
    return text is not None and f"{_MARK_PREFIX}{marker} -->" in text


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
