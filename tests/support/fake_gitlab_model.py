"""Records behind the fake GitLab and the request log (its clock: ``tests.support.clock``).

Times are epoch **milliseconds**: GitLab's REST timestamps carry milliseconds
(``2026-11-30T06:43:14.123Z``), so two writes in the same millisecond share an
``updated_at`` (tests advance the clock to separate them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any

from tests.support.fake_tracker import COMMON_LOGGED_HEADERS, name_color

JSON = dict[str, Any]

ISSUE_STATES = ("opened", "closed")
MR_STATES = ("opened", "closed", "merged", "locked")
PIPELINE_STATUSES = (
    "created",
    "waiting_for_resource",
    "preparing",
    "pending",
    "running",
    "success",
    "failed",
    "canceled",
    "skipped",
    "manual",
    "scheduled",
)

# Labels for ``FakeGitLab.bulk_issues`` (titles and bodies: ``bulk_text``).
BULK_LABELS = ("bug", "feature", "documentation", "priority::high", "workflow::in progress")

_LABEL_COLORS = {
    "bug": ("#dc143c", "Something is broken"),
    "feature": ("#428bca", "New functionality"),
    "documentation": ("#f0ad4e", None),
}


def iso(ms: int) -> str:
    """Epoch milliseconds as the REST API writes them: ``2026-11-30T06:43:14.123Z``."""
    dt = datetime.fromtimestamp(ms // 1000, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def hook_time(ms: int) -> str:
    """Epoch milliseconds as webhook ``changes`` (and live hook attributes) carry them:
    ``2026-11-30 06:43:14 UTC``."""
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def http_date(seconds: int) -> str:
    """RFC 2616 date, as in ``RateLimit-ResetTime``."""
    return formatdate(seconds, usegmt=True)


@dataclass
class User:
    id: int
    username: str
    name: str
    state: str = "active"
    bot: bool = False


@dataclass
class Label:
    id: int
    name: str
    color: str
    description: str | None
    created_ms: int

    @classmethod
    def make(cls, label_id: int, name: str, created_ms: int) -> Label:
        known = _LABEL_COLORS.get(name)
        if known is not None:
            return cls(label_id, name, known[0], known[1], created_ms)
        return cls(label_id, name, f"#{name_color(name)}", None, created_ms)

    @property
    def scope(self) -> str | None:
        """``workflow`` for ``workflow::in progress`` (the part before the last ``::``)."""
        return scope_of(self.name)


def scope_of(name: str) -> str | None:
    head, sep, _ = name.rpartition("::")
    return head if sep and head else None


@dataclass
class Note:
    id: int
    author: str
    body: str
    created_ms: int
    updated_ms: int
    system: bool = False


@dataclass
class Issue:
    project_id: int
    iid: int
    id: int
    title: str
    description: str | None
    author: str
    created_ms: int
    updated_ms: int
    state: str = "opened"
    closed_ms: int | None = None
    closed_by: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    confidential: bool = False
    moved_to_id: int | None = None  # the id (not iid) of the issue it was moved to
    duplicate_of: str | None = None  # the API URL of the issue it was closed as a duplicate of
    milestone_id: int | None = None  # one of its project's ``milestones``
    issue_type: str = "issue"  # issue, incident, test_case, task

    @property
    def user_notes_count(self) -> int:
        return sum(1 for n in self.notes if not n.system)


@dataclass
class Pipeline:
    id: int
    iid: int
    sha: str
    ref: str
    status: str
    created_ms: int
    updated_ms: int


@dataclass
class MergeRequest:
    project_id: int
    iid: int
    id: int
    title: str
    description: str
    author: str
    source_branch: str
    sha: str
    created_ms: int
    updated_ms: int
    target_branch: str = "main"
    state: str = "opened"
    draft: bool = False
    closes: list[int] = field(default_factory=list)  # issue iids closed on merge
    mentions: list[int] = field(default_factory=list)  # issue iids only mentioned
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    head_pipeline: Pipeline | None = None
    merged_ms: int | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    closed_ms: int | None = None
    closed_by: str | None = None
    source_project_id: int | None = None  # a fork the source branch lives in
    foreign: list[tuple[int, int]] = field(default_factory=list)  # (project id, iid) named

    @property
    def related(self) -> list[int]:
        return [*self.closes, *(i for i in self.mentions if i not in self.closes)]


@dataclass
class Project:
    id: int
    path_with_namespace: str
    name: str
    created_ms: int
    default_branch: str = "main"
    labels: dict[str, Label] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    merge_requests: dict[int, MergeRequest] = field(default_factory=dict)
    next_iid: int = 1
    next_mr_iid: int = 1
    milestones: dict[int, str] = field(default_factory=dict)  # id -> title
    archived: bool = False

    @property
    def namespace(self) -> str:
        return self.path_with_namespace.rsplit("/", 1)[0]

    @property
    def path(self) -> str:
        return self.path_with_namespace.rsplit("/", 1)[1]


LOGGED_HEADERS = (*COMMON_LOGGED_HEADERS, "private-token", "idempotency-key")
