"""What a hosted tracker must provide, in tracker-neutral terms.

A tracker folder (``github/``, ``gitlab/``) implements ``Tracker``: list changed issues
page by page, fetch one issue and its evidence, create an issue, and apply a planned
change. Everything else (the mirror, the sync loop, write-back planning, mapping onto
the contract, retries, webhook dedup) is shared and lives in ``providers/hosted``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from cotal_tasks.core import MAX_EVIDENCE, TaskEvidence

if TYPE_CHECKING:
    from cotal_tasks.providers.hosted.boundary import ItemBoundary

EvidenceKind = Literal["commit", "branch", "run", "review"]


@dataclass(frozen=True, slots=True)
class NativeState:
    """The native facts the status rules read."""

    state: str  # GitHub open|closed, GitLab opened|closed
    state_reason: str | None = None
    labels: tuple[str, ...] = ()
    project_status: str | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One link the tracker knows, newest last by ``at`` (epoch ms)."""

    kind: EvidenceKind
    ref: str
    at: int


@dataclass(frozen=True, slots=True)
class TrackedIssue:
    """An issue as the tracker holds it, in neutral terms."""

    number: int
    task_id: str
    title: str
    body: str | None
    native: NativeState
    assignees: tuple[str, ...]
    created_at: int  # epoch ms
    updated_at: int  # epoch ms
    evidence: tuple[Evidence, ...] = ()
    # The issue left the project: "transferred", "deleted" or "moved". A task for it
    # becomes ``dropped`` with this as ``statusSource``; an issue read only as gone (no
    # title, the tracker answered 301 or 410) keeps the rest of the record as it was.
    gone: str | None = None


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of changed issues, with what it tells the sync."""

    issues: Sequence[TrackedIssue]
    linked: frozenset[int] = frozenset()  # issues a merge/pull request on this page references
    cursor: str | None = None  # the highest updated_at seen so far (tracker's own format)
    not_modified: bool = False  # a conditional request said nothing changed
    etag: tuple[str, str] | None = None  # (request URL, ETag) of the first page
    total_pages: int | None = None  # when the tracker says how many pages there are
    listing: bool = True  # False: not a page of the issue listing (links found elsewhere)
    marks: Mapping[str, str] | None = None  # further named cursors to checkpoint
    # Issues whose evidence was read with this page: what earlier pages linked them to
    # is covered (a later page's link is not: it may be newer than the read).
    evidenced: frozenset[int] = frozenset()
    reread: int = 0  # the last issues are earlier pages' issues, read again for evidence


@dataclass(frozen=True, slots=True)
class TrackerChange:
    """A planned write: what to do to one issue so it says what the new record says."""

    assign: tuple[str, ...] = ()
    unassign: tuple[str, ...] = ()
    add_labels: tuple[str, ...] = ()
    remove_labels: tuple[str, ...] = ()
    state: Literal["open", "closed"] | None = None
    state_reason: Literal["completed", "not_planned", "reopened"] | None = None
    body: str | None = None
    comment: str | None = None
    # Closing an already closed issue with another reason: a tracker that only takes a
    # reason on a state change (GitHub) reopens it first.
    reclose: bool = False

    def __bool__(self) -> bool:
        return any(
            (
                self.assign,
                self.unassign,
                self.add_labels,
                self.remove_labels,
                self.state,
                self.body is not None,
                self.comment,
            )
        )


@dataclass(frozen=True, slots=True)
class NewIssue:
    title: str
    body: str | None
    labels: tuple[str, ...] = field(default=())


class Tracker(Protocol):
    """The tracker-specific half of a hosted provider."""

    name: str  # "github", "gitlab": names the tracker in messages and metrics
    boundary: ItemBoundary  # where an item that does not map is recorded, by reason
    # An issue keeps only one assignee (GitLab Free): a claim then rides on the claimed
    # label alone when someone else is assigned. ``None``: not known yet.
    single_assignee: bool | None

    def number_of(self, task_id: str) -> int | None:
        """The issue number a task id of this tracker names, or ``None``."""
        ...

    def list_changed(
        self, cursor: str | None, etag: tuple[str, str] | None, marks: Mapping[str, str]
    ) -> AsyncIterator[ListPage]:
        """Pages of issues updated at or after ``cursor`` minus the overlap, oldest first.

        ``marks`` are the named cursors earlier pages returned (``ListPage.marks``), for
        listings beside the issues (a tracker's merge requests).
        """
        ...

    async def open_numbers(self) -> tuple[set[int], int]:
        """The numbers of every open issue (pull and merge requests excluded), and the
        requests the listing took: the reconcile sweep's view of what is still there."""
        ...

    async def recent(self, count: int) -> list[TrackedIssue]:
        """The ``count`` most recently updated issues, newest first (one request)."""
        ...

    async def fetch(self, number: int) -> TrackedIssue | None:
        """One issue with its evidence, or ``None`` when it does not exist (or is not one)."""
        ...

    async def create(self, issue: NewIssue) -> TrackedIssue: ...

    async def apply(self, number: int, change: TrackerChange) -> None:
        """Apply ``change``; raise ``TrackerRefused`` with what was and was not done."""
        ...

    async def find_marked(self, marker: str) -> TrackedIssue | None:
        """A recently created issue whose body carries ``marker`` (an earlier attempt of a
        create), or ``None``."""
        ...

    async def has_marked_comment(self, number: int, marker: str) -> bool:
        """Whether a comment carrying ``marker`` is on the issue already."""
        ...


def epoch_ms(stamp: str | None) -> int:
    """A tracker's ISO 8601 timestamp (``2026-11-30T06:43:14Z``, with or without
    milliseconds) as epoch milliseconds; 0 when there is none."""
    if not stamp:
        return 0
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def evidence_entries(
    found: Sequence[Evidence], refused: Callable[[Evidence], None] | None = None
) -> tuple[TaskEvidence, ...]:
    """Tracker evidence as record entries: deduplicated by kind and ref, the newest
    ``MAX_EVIDENCE``.

    An entry the record refuses (a branch named like a credential, ``fix/token=refresh``)
    is left out and handed to ``refused``; the others stay.
    """
    latest: dict[tuple[str, str], Evidence] = {}
    for item in found:
        key = (item.kind, item.ref)
        if key not in latest or latest[key].at < item.at:
            latest[key] = item
    entries: list[TaskEvidence] = []
    for e in sorted(latest.values(), key=lambda e: e.at):
        try:
            entries.append(TaskEvidence(kind=e.kind, ref=e.ref, addedAt=e.at))
        except ValueError:  # pydantic's ValidationError is one
            if refused is not None:
                refused(e)
    return tuple(entries[-MAX_EVIDENCE:])


class IssueGone(Exception):
    """The tracker says an issue left the project (GitHub: 301 transferred, 410 deleted;
    either tracker: 404 while the project's issues are readable, deleted)."""

    def __init__(self, fate: str) -> None:
        super().__init__(fate)
        self.fate = fate


class TrackerRefused(Exception):
    """A tracker write failed; ``applied`` names the steps that had already taken effect."""

    def __init__(self, error: Exception, applied: tuple[str, ...] = ()) -> None:
        super().__init__(str(error))
        self.error = error
        self.applied = applied
