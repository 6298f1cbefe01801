"""Records behind the fake GitHub and the request log (its clock: ``tests.support.clock``).

Times are epoch seconds: GitHub's REST timestamps have second resolution, so two writes in
the same second share an ``updated_at`` (tests advance the clock to separate them).
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.support.clock import TimeLike, to_ms
from tests.support.fake_tracker import COMMON_LOGGED_HEADERS, name_color

JSON = dict[str, Any]

STATE_REASONS = ("completed", "reopened", "not_planned", "duplicate")
DOCS = "https://docs.github.com/rest"

# Labels for ``FakeGitHub.bulk_issues`` (titles and bodies: ``bulk_text``).
BULK_LABELS = ("bug", "enhancement", "documentation", "question", "help wanted")


def iso(ts: int) -> str:
    """Epoch seconds as GitHub writes them: ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> float:
    """An ISO 8601 timestamp (``Z`` or an offset; a bare one is UTC) as epoch seconds."""
    parsed = datetime.fromisoformat(value.strip().replace("z", "Z"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def to_epoch(value: TimeLike) -> int:
    """Epoch seconds (floored) from an epoch number, an ISO string or a datetime."""
    return to_ms(value) // 1000


def node_id(prefix: str, *numbers: int) -> str:
    """A node id in GitHub's current style (``I_kwDO…``), stable for the same numbers."""
    raw = b"".join(n.to_bytes(8, "big") for n in numbers)
    return f"{prefix}_kwDO" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def user_id(login: str) -> int:
    """A stable numeric user id for a login."""
    return 1_000_000 + zlib.crc32(login.lower().encode()) % 180_000_000


_DEFAULT_LABELS = {
    "bug": ("d73a4a", "Something isn't working"),
    "documentation": ("0075ca", "Improvements or additions to documentation"),
    "duplicate": ("cfd3d7", "This issue or pull request already exists"),
    "enhancement": ("a2eeef", "New feature or request"),
    "good first issue": ("7057ff", "Good for newcomers"),
    "help wanted": ("008672", "Extra attention is needed"),
    "invalid": ("e4e669", "This doesn't seem right"),
    "question": ("d876e3", "Further information is requested"),
    "wontfix": ("ffffff", "This will not be worked on"),
}


@dataclass
class Label:
    name: str
    id: int
    color: str
    description: str | None
    default: bool

    @classmethod
    def make(cls, name: str, label_id: int) -> Label:
        known = _DEFAULT_LABELS.get(name)
        if known is not None:
            return cls(name, label_id, known[0], known[1], True)
        return cls(name, label_id, name_color(name), None, False)


@dataclass
class Comment:
    id: int
    user: str
    body: str
    created_at: int
    updated_at: int


@dataclass
class Event:
    """One timeline item. ``kind`` is GitHub's ``event`` string."""

    kind: str
    actor: str
    created_at: int
    id: int | None = None
    commit_id: str | None = None
    commit_repo: str | None = None
    source: tuple[str, int] | None = None  # (repo, number) of the referencing issue or PR
    comment: Comment | None = None
    extra: JSON = field(default_factory=dict)
    closer: tuple[str, int] | None = None  # (repo, number) of the pull request that closed it


@dataclass
class Pull:
    """The pull-request half of an issue record."""

    id: int
    head_ref: str
    head_sha: str
    base_ref: str = "main"
    draft: bool = False
    merged_at: int | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    head_repo: str | None = None  # the fork the head branch lives in (None: the same repo)


@dataclass
class Issue:
    repo: str
    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: int
    updated_at: int
    state: str = "open"
    state_reason: str | None = None
    closed_at: int | None = None
    closed_by: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    timeline: list[Event] = field(default_factory=list)
    pull: Pull | None = None
    locked: bool = False
    blocked_by: int = 0
    deleted: bool = False
    moved_to: tuple[str, int] | None = None  # set when transferred away
    project_status: str | None = None  # its card's Projects v2 "Status" (None: no card)
    milestone: int | None = None  # the number of its repository's milestone
    issue_type: str | None = None  # its issue type's name (an organisation's types)

    @property
    def visible(self) -> bool:
        return not self.deleted and self.moved_to is None


@dataclass
class Repo:
    full_name: str
    id: int
    created_at: int
    assignable: set[str] = field(default_factory=set)
    labels: dict[str, Label] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    next_number: int = 1
    default_branch: str = "main"
    milestones: dict[int, str] = field(default_factory=dict)  # number -> title
    archived: bool = False  # reads answer; writes are refused (403)

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


LOGGED_HEADERS = (
    *COMMON_LOGGED_HEADERS,
    "if-none-match",
    "if-modified-since",
    "x-github-api-version",
)
