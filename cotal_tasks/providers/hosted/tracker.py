"""What a hosted tracker must provide, in tracker-neutral terms.

A tracker folder (``github/``, ``gitlab/``, ``jira/``) subclasses ``Tracker`` and writes
its abstract methods: walk the changed issues page by page, list the open ones, read one
with its evidence, page through the newest, create one, plan a write as steps, and read
the marks on an issue's comments. Everything else (the mirror, the sync loop, write-back
planning, mapping onto the contract, retries, webhook dedup) is shared and lives in
``providers/hosted``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

from cotal_tasks.core import MAX_EVIDENCE, TaskEvidence
from cotal_tasks.core.models import EvidenceKind
from cotal_tasks.providers.hosted.boundary import ItemBoundary

# The tracker folders read ``epoch_ms`` here; it lives with the other value readers.
from cotal_tasks.providers.hosted.boundary import epoch_ms as epoch_ms
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.taskids import number_in, task_id

# ``list_changed``'s ``remembered[MOVED]``: the mark of the last webhook delivery that said
# the source moved beyond the issues it names (a push), or absent. A tracker that reads a
# feed on its own cadence reads it at once when the mark is new to it.
MOVED = "moved"
# ``list_changed``'s ``remembered[PRESENT]``: ``True`` in a poll asked to reach the
# tracker's present (the CLI's ``sync``): a tracker reads what it otherwise reads on its
# own cadence now, whatever that cadence says. A tracker with no such cadence ignores it.
PRESENT = "present"


@dataclass(frozen=True, slots=True)
class NativeState:
    """The native facts the status rules read."""

    state: str  # GitHub open|closed, GitLab opened|closed
    state_reason: str | None = None
    labels: tuple[str, ...] = ()
    # Further facts of one tracker the rules may read, by name (GitHub: project_status).
    extra: Mapping[str, str] = field(default_factory=dict)
    # The tracker's own name for where the issue stands, shown as ``statusSource`` when a
    # rule decided on anything but a label (Jira: the workflow status, "In Progress");
    # ``None``: the state, or the extra fact the rule read.
    source: str | None = None


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
    # Its evidence could not be read this time (the evidence endpoint did not answer):
    # the record keeps what it had, and the sync reads the issue again later.
    evidence_unread: bool = False
    # The mark of the write through the endpoint that created it (``hosted.writeback``),
    # when it carries one: a retry of that create finds it by this.
    mark: str | None = None
    # What the endpoint's scope reads besides labels and assignees (``hosted.scope``),
    # where the tracker has it: the milestone's title, the issue type's name, and when
    # the issue was closed (epoch ms; ``None``: open, or not said).
    milestone: str | None = None
    issue_type: str | None = None
    closed_at: int | None = None
    # Why the issue is outside the source it was read from, in a left task's words after
    # ``out of scope: `` (a source over many projects, a GitLab group: the issue's project
    # left the group, is archived, or sits in a subgroup the source leaves out); ``None``:
    # inside. Set by the tracker; the scope checks it first (``hosted.scope``).
    outside_source: str | None = None
    # Why the issue is outside the endpoint's scope (``hosted.scope``), as its task's
    # ``statusSource`` says it; ``None``: inside. Set by the sync, never by a tracker.
    out_of_scope: str | None = None

    @classmethod
    def vanished(cls, number: int, task_id: str, fate: str) -> TrackedIssue:
        """An issue the tracker answered for only as gone (``fate``): nothing of it is
        read, so the task keeps the rest of its record."""
        return cls(number, task_id, "", None, NativeState("closed"), (), 0, 0, gone=fate)


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of changed issues, with what it tells the sync."""

    issues: Sequence[TrackedIssue]
    linked: frozenset[int] = frozenset()  # issues a merge/pull request on this page references
    cursor: str | None = None  # the highest updated_at seen so far (tracker's own format)
    not_modified: bool = False  # a conditional request said nothing changed
    total_pages: int | None = None  # when the tracker says how many pages there are
    # Pages of the issue listing this page counts as, in the sync report and its progress
    # (0: a page of a listing beside the issues, which only names issues to read).
    pages: int = 1
    # The tracker's own entries to keep in the sync checkpoint (an ETag for a conditional
    # request, the cursor of a listing beside the issues); the next poll hands them back.
    remember: Mapping[str, Any] | None = None
    # Issues whose evidence was read with this page: what earlier pages linked them to
    # is covered (a later page's link is not: it may be newer than the read).
    evidenced: frozenset[int] = frozenset()
    # The last ``fetched`` issues were read one by one with their evidence, not listed.
    fetched: int = 0
    # Issues whose evidence could not be read (the evidence endpoint did not answer): the
    # sync reads them again, with their evidence, once it answers.
    owed: frozenset[int] = frozenset()
    # Issues an event says may have left the scope (a label removed, a milestone changed)
    # which a listing with the scope's filters no longer shows: the sync reads again
    # those it mirrors, and checks them against the scope.
    rescoped: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class TrackerChange:
    """A planned write: what to do to one issue so it says what the new record says."""

    assign: tuple[str, ...] = ()
    unassign: tuple[str, ...] = ()
    add_labels: tuple[str, ...] = ()
    remove_labels: tuple[str, ...] = ()
    state: Literal["open", "closed"] | None = None
    state_reason: str | None = None  # the tracker's own reason (``WritePlan.reasons``)
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
    """An issue to create. Besides the status label, what the endpoint's scope needs for
    the issue to stay in it (``hosted.scope``): its labels, milestone, type, assignee."""

    title: str
    body: str | None
    labels: tuple[str, ...] = field(default=())
    milestone: str | None = None
    issue_type: str | None = None
    assignees: tuple[str, ...] = ()


# One write step a tracker plans: its name (reported in ``TrackerRefused.applied`` once it
# took effect) and the call that makes it.
Step = tuple[str, Callable[[], Awaitable[object]]]
Order = Literal["updated", "created"]


class Tracker(abc.ABC):
    """The tracker-specific half of a hosted provider, in the manner of gidgethub's
    abstract client: a tracker folder writes the seven abstract methods (how to walk, list,
    read, create and plan a write on its tracker); what is built on them (the issue a task
    id names, applying a planned write step by step and spaced, finding an earlier
    attempt's issue or comment, the preview's recent issues) is written here once.

    The item boundary is created by the assembly and given: every part that records a
    degraded item (the tracker, the store, the sync, the webhook route) is handed the same
    one, and none reaches another's.
    """

    name: ClassVar[str]  # "GitHub", "GitLab", "Jira": names the tracker in messages, metrics
    # An issue keeps only one assignee (GitLab Free): a claim then rides on the claimed
    # label alone when someone else is assigned. ``None``: not known yet.
    single_assignee: bool | None = False
    # The repository's or project's stable id, once the tracker knows it (GitLab issues
    # carry their project's id); webhook deliveries match on it. ``None``: not known.
    known_id: int | None = None
    # A source over many projects (a GitLab group) says whether a webhook delivery's
    # project, by its stable id and its path, is one of them; ``None``: a source of one
    # project, matched by its own path and id.
    holds: Callable[[int | None, str | None], bool] | None = None

    def __init__(self, boundary: ItemBoundary, *, path: str, mutation_spacing_s: float) -> None:
        self.boundary = boundary
        self.path = path  # what its task ids start with (``hosted.taskids``)
        self.mutation_spacing_s = mutation_spacing_s

    # -- what a tracker writes ----------------------------------------------------------
    @abc.abstractmethod
    def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        """Pages of issues updated at or after ``cursor`` minus the overlap, oldest first.

        ``remembered`` is the checkpoint, holding what earlier pages asked to keep
        (``ListPage.remember``), the latest of each entry, ``MOVED`` and ``PRESENT``.
        """

    @abc.abstractmethod
    async def open_numbers(self) -> tuple[set[int], int]:
        """The numbers of every open issue (pull and merge requests excluded), and the
        requests the listing took: the reconcile sweep's view of what is still there."""

    @abc.abstractmethod
    async def fetch(self, number: int) -> TrackedIssue | None:
        """One issue with its evidence, or ``None`` when it does not exist (or is not one)."""

    @abc.abstractmethod
    def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        """Pages of issues, most recently updated or created first, without evidence and
        each with the write mark it carries (``TrackedIssue.mark``); ends at the last page.
        ``since_ms``: only those created since then are wanted (a tracker whose search
        can say so asks for no others; the reader stops at older ones anyway)."""

    @abc.abstractmethod
    async def create(self, issue: NewIssue) -> TrackedIssue:
        """Create the issue (its body or a property carries the write's mark)."""

    @abc.abstractmethod
    async def steps(self, number: int, change: TrackerChange) -> Sequence[Step]:
        """The writes that make ``change``, in order. Whatever can refuse is read and
        checked here, before any of them is sent; a refusal here writes nothing."""

    @abc.abstractmethod
    async def comment_marks(self, number: int) -> Collection[str]:
        """The write marks the issue's recent comments carry."""

    def sibling(self, source: str) -> Self:
        """The same tracker over another of the endpoint's sources (a repository, a
        project), sharing this one's HTTP client and item boundary. A tracker with several
        sources writes it; one source: this tracker, for its own source only."""
        if source != self.path:
            raise ValueError(f"{self.name} reads one source here ({self.path}), not {source}")
        return self

    # -- built on them, once for every tracker -------------------------------------------
    def number_of(self, task_id: str) -> int | None:
        """The issue number a task id of this tracker names, or ``None``."""
        return number_in(self.path, task_id)

    def task_id_of(self, number: int) -> str:
        """The task id of this tracker's issue ``number`` (the inverse of ``number_of``)."""
        return task_id(self.path, number)

    async def apply(self, number: int, change: TrackerChange) -> None:
        """Apply ``change``, ``mutation_spacing_s`` between two writes (the trackers ask
        for spaced mutations); raise ``TrackerRefused`` with the steps that took effect."""
        applied: list[str] = []
        try:
            for index, (step, write) in enumerate(await self.steps(number, change)):
                if index and self.mutation_spacing_s:
                    await asyncio.sleep(self.mutation_spacing_s)
                await write()
                applied.append(step)
        except TrackerRefused as exc:
            raise TrackerRefused(exc.error, (*applied, *exc.applied)) from exc
        except TrackerHttpError as exc:
            raise TrackerRefused(exc, tuple(applied)) from exc

    async def recent(self, count: int) -> list[TrackedIssue]:
        """The ``count`` most recently updated issues, newest first (one request)."""
        async with contextlib.aclosing(self.newest("updated")) as pages:
            async for page in pages:
                return list(page[:count])
        return []

    async def find_marked(self, marker: str, since_ms: int) -> TrackedIssue | None:
        """An issue carrying ``marker`` (an earlier attempt of a create, begun at
        ``since_ms``), or ``None``: newest-created first, page after page while the issues
        are younger than the attempt (``CLOCK_SKEW_MS`` allowed), at most ``MARKED_PAGES``
        pages; the issues others created since never hide it."""
        since = since_ms - CLOCK_SKEW_MS
        async with contextlib.aclosing(self.newest("created", since)) as pages:
            return await find_marked_item(pages, since_ms, lambda issue: issue.mark == marker)

    async def has_marked_comment(self, number: int, marker: str) -> bool:
        """Whether a comment carrying ``marker`` is on the issue already."""
        return marker in await self.comment_marks(number)


# How far back to look for an earlier attempt's issue: the tracker's clock may be behind
# the bridge's by this much, and no more than this many pages are read.
CLOCK_SKEW_MS = 300_000
MARKED_PAGES = 30


async def find_marked_item(
    pages: AsyncIterator[Sequence[TrackedIssue]],
    since_ms: int,
    marked: Callable[[TrackedIssue], bool],
) -> TrackedIssue | None:
    """The first issue ``marked`` picks on the newest-created-first ``pages`` that can hold
    one created since ``since_ms``: reading stops after the last page, at a page whose
    oldest issue is older than that (``CLOCK_SKEW_MS`` allowed; an issue with no readable
    stamp proves nothing), or after ``MARKED_PAGES`` pages."""
    read = 0
    async for page in pages:
        for issue in page:
            if marked(issue):
                return issue
        read += 1
        oldest = page[-1].created_at if page else 0
        if read >= MARKED_PAGES or 0 < oldest < since_ms - CLOCK_SKEW_MS:
            break
    return None


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
