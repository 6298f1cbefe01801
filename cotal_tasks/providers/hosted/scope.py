"""An endpoint's scope: which issues of its sources are its tasks. Pure.

A hosted endpoint mirrors one or more sources of one tracker (repositories, projects)
through one scope: labels (all of them), labels excluded, a milestone, an issue type, an
assignee, and a horizon for the import (open issues plus those closed in the last N
days). Each tracker pushes what its query can filter (``Tracker`` listings); the sync
checks every issue here all the same, since a pushed filter cannot say that an issue
*left* the slice, and a tracker filters only what its API offers.

The rules of leaving and re-entering, written once for every tracker:

- An issue outside the scope that has no task is not taken (the horizon included: a
  closed issue older than it is never imported).
- A task whose issue leaves the scope (a label removed, the milestone changed, an
  excluded label added, assigned to someone the scope does not admit) is a person's
  change: the task stays, readable by ``get-task`` and ``list-tasks``, as ``dropped``
  (a task already ``done`` stays ``done``: the contract's two terminals tell finished
  from abandoned, and leaving a board abandons nothing finished), its ``statusSource``
  saying why (``out of scope: label agent-ready missing``), its binding kept. The bridge
  writes nothing to its issue while it is out: a seat's or an operator's next write is
  refused (``failed-precondition``, nothing written) naming what took it out.
- When the issue comes back into the scope, the same task (same id, its history in the
  mirror) maps from the issue again, as any other.
- The horizon is an import rule only: a task never leaves because it grew old.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated

from pydantic import Field

from cotal_tasks.core.models import Settings, TaskStatus
from cotal_tasks.providers.hosted.tracker import NewIssue, TrackedIssue

OUT_OF_SCOPE = "out of scope"  # how a left task's statusSource begins
ANYONE, NOBODY = "anyone", "none"  # the assignee values that name no account
DAY_MS = 86_400_000
# What the sync hands a tracker's listing beside its checkpoint: the import horizon's
# edge, epoch ms (a tracker whose query can ask "changed since" lists no older issue).
HORIZON = "horizon"
# A tracker's own scope keys (``HostedConfig.outside_natively``): why an issue is outside
# them, after ``out of scope: ``, or ``None``.
Native = Callable[[TrackedIssue], str | None]


class Scope(Settings):
    """``[endpoints.<tracker>.scope]``: the slice of the sources that is the endpoint's
    tasks. Empty (the default): every issue."""

    labels: tuple[str, ...] = ()  # the issue carries all of them (case-insensitive)
    exclude_labels: tuple[str, ...] = ()  # and none of these
    milestone: str | None = None  # the milestone's title
    issue_type: str | None = None  # the issue type's name
    # "anyone" (no condition), "none" (no assignee but the seats' own accounts, so a
    # seat's claim keeps its issue in), or an account of the seat directory.
    assignee: str = ANYONE
    # Import only open issues and those closed in the last N days.
    horizon_days: Annotated[float | None, Field(gt=0)] = None

    def keys(self) -> frozenset[str]:
        """The keys this scope sets: what the tracker must be able to read."""
        return frozenset(
            key
            for key, value in (
                ("labels", self.labels),
                ("exclude_labels", self.exclude_labels),
                ("milestone", self.milestone),
                ("issue_type", self.issue_type),
                ("assignee", self.assignee != ANYONE),
                ("horizon_days", self.horizon_days),
            )
            if value
        )

    @property
    def account(self) -> str | None:
        """The account the scope's issues are assigned to, if it names one."""
        return None if self.assignee in (ANYONE, NOBODY) else self.assignee

    def lines(self) -> list[str]:
        """The scope as ``check-config`` prints it."""
        said = [
            *(f"label {name}" for name in self.labels),
            *(f"not label {name}" for name in self.exclude_labels),
            *([f"milestone {self.milestone}"] if self.milestone else []),
            *([f"issue type {self.issue_type}"] if self.issue_type else []),
            *([f"assignee {self.assignee}"] if self.assignee != ANYONE else []),
            *([f"closed in the last {self.horizon_days:g} days"] if self.horizon_days else []),
        ]
        return [f"scope: {', '.join(said)}"] if said else ["scope: every issue"]


def outside(
    scope: Scope, issue: TrackedIssue, seats: Mapping[str, str], native: Native | None = None
) -> str | None:
    """Why ``issue`` is outside ``scope`` or the tracker's own keys (``native``) (its left
    task's ``statusSource``), or ``None``. The horizon is not asked here
    (``beyond_horizon``); what the tracker says of the issue's source
    (``TrackedIssue.outside_source``) is asked first."""
    if issue.outside_source is not None:
        return f"{OUT_OF_SCOPE}: {issue.outside_source}"
    labels = {label.casefold() for label in issue.native.labels}
    why: str | None = None
    missing = [name for name in scope.labels if name.casefold() not in labels]
    excluded = [name for name in scope.exclude_labels if name.casefold() in labels]
    if missing:
        why = f"label {missing[0]} missing"
    elif excluded:
        why = f"label {excluded[0]} added"
    elif scope.milestone and (issue.milestone or "").casefold() != scope.milestone.casefold():
        why = f"milestone {issue.milestone}" if issue.milestone else "no milestone"
    elif scope.issue_type and (issue.issue_type or "").casefold() != scope.issue_type.casefold():
        why = f"type {issue.issue_type}" if issue.issue_type else "no issue type"
    elif scope.assignee == NOBODY:
        people = [login for login in issue.assignees if login not in seats]
        why = f"assigned to {people[0]}" if people else None
    elif scope.account is not None and scope.account not in issue.assignees:
        why = f"not assigned to {scope.account}"
    elif native is not None:
        why = native(issue)
    return None if why is None else f"{OUT_OF_SCOPE}: {why}"


def horizon_edge(scope: Scope, now_ms: int) -> int | None:
    """The import horizon's edge (epoch ms), or ``None`` without a horizon."""
    if scope.horizon_days is None:
        return None
    return now_ms - int(scope.horizon_days * DAY_MS)


def beyond_horizon(scope: Scope, issue: TrackedIssue, now_ms: int) -> bool:
    """Whether ``issue`` closed before the import horizon (when it closed, or else when
    it last changed); an open issue never is."""
    if scope.horizon_days is None or issue.native.state != "closed":
        return False
    closed = issue.closed_at or issue.updated_at
    return closed < now_ms - int(scope.horizon_days * DAY_MS)


def left_out(
    scope: Scope,
    issue: TrackedIssue,
    seats: Mapping[str, str],
    now_ms: int,
    native: Native | None = None,
) -> str | None:
    """Why an issue with no task is not taken, in the words of a left task's
    ``statusSource`` (outside the scope, or closed before the import horizon), or
    ``None``: it is."""
    if beyond_horizon(scope, issue, now_ms):
        return f"{OUT_OF_SCOPE}: closed before the last {scope.horizon_days:g} days"
    return outside(scope, issue, seats, native)


def left_status(status: TaskStatus) -> TaskStatus:
    """The status of a task whose issue left the scope, from the status the issue maps
    to (or the task had): ``done`` stays ``done``, anything else is ``dropped`` (so a
    left task is always terminal: ``core.models.TERMINAL``)."""
    return "done" if status == "done" else "dropped"


def left_scope(status_source: str | None) -> bool:
    """Whether a task's ``statusSource`` says its issue left the endpoint's scope."""
    return bool(status_source) and str(status_source).startswith(OUT_OF_SCOPE + ":")


def with_needs(issue: NewIssue, scope: Scope) -> NewIssue:
    """A created issue with what the scope needs of it to stay in: its labels, milestone,
    issue type and account (a task a seat creates never drops out of its own board)."""
    have = {label.casefold() for label in issue.labels}
    labels = (*issue.labels, *(name for name in scope.labels if name.casefold() not in have))
    account = scope.account
    return NewIssue(
        issue.title,
        issue.body,
        labels,
        milestone=scope.milestone or issue.milestone,
        issue_type=scope.issue_type or issue.issue_type,
        assignees=(*issue.assignees, *([account] if account else [])),
    )
