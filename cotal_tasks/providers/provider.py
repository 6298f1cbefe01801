"""What a provider is to the bridge: one entry in the registry, and what its ``build`` returns.

A provider is one folder under ``providers/`` (``board``, ``github``, ``gitlab``,
``tower_do``): its settings model (the endpoint's ``[endpoints.<section>]`` table, tagged
by a ``provider`` literal, built on ``Settings``), and a ``Provider`` entry naming its
``build`` and what else it offers (a webhook route, a description for ``check-config``, a
preview). The bridge's composition root opens the endpoint's local store (a ``Mirror``),
calls ``build`` with it, and runs what comes back. ``Built`` declares what the endpoint
can do as typed fields (a change listener, a catch-up with its report, degradations, a
webhook receiver, fast JSON reads); the bridge reads those declarations and never asks
which tracker, or which class, it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from cotal_tasks.core import Task
from cotal_tasks.providers.store import JsonReads, Mirror, TaskStore


class SourceRefused(Exception):
    """A provider's source (a hosted tracker) gave a final refusal, or no answer, to a
    request: ``status`` is its HTTP status (``None``: no answer) and ``message`` its own
    words. Providers raise their own subclasses; the bridge reads these fields alone (the
    CLI's one-line refusal), never the subclass."""

    status: int | None
    message: str
    # What the refusal is about, where the source knows it: the environment variable the
    # token came from, and the repository or project asked for (the CLI names both).
    credential: str | None = None
    source: str | None = None


SeatUids = Callable[[str, str], Awaitable[str | None]]  # (owner, actor) -> current uid


async def no_uids(owner: str, actor: str) -> str | None:
    return None


class TrackerMetrics(Protocol):
    """Where a provider reports its traffic with the tracker (the bridge's metrics)."""

    def tracker_request(self, endpoint: str, status: str) -> None: ...

    def rate_limit_wait(self, endpoint: str, seconds: float) -> None: ...

    def credential_wait(self, tracker: str, credential: str, cause: str, seconds: float) -> None:
        """A request waited ``seconds`` before it was sent, for the budget of the credential
        (its fingerprint) it shares with other endpoints: ``cause`` is the pool at its
        reserve or floor, ``retry-after`` or ``spacing``."""

    def degraded(self, endpoint: str, reason: str) -> None: ...

    def reconciled(self, endpoint: str, requests: int, reads: int) -> None: ...


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What every provider's ``build`` receives besides its own settings."""

    name: str  # the endpoint's name
    space: str
    mirror: Mirror  # the endpoint's local store: the board itself, or a source's mirror
    clock: Callable[[], int]  # wall clock, milliseconds
    json_reads: JsonReads | None = None  # the local store's fast reads, where it has them
    seat_uids: SeatUids = no_uids  # a seat's current lifecycle uid, from its presence card
    metrics: TrackerMetrics | None = None


class Runner(Protocol):
    """A background loop the bridge runs while it serves the endpoint."""

    async def run(self, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class Looked:
    """The issues of an endpoint its source names for a delivery when asked (a renamed
    label, an organisation's project card); ``numbers`` ``None``: more than the endpoint
    refreshes one by one, or none a listing can find (the next poll reads every issue)."""

    numbers: frozenset[int] | None


class WebhookReceiver(Protocol):
    """An endpoint's side of its provider's webhook route: everything the route may ask
    of the endpoint for a delivery (which endpoint it is for, what it names, what to do
    about it). The route never reaches past it into the store, the sync or the source."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str:
        """What the endpoint's deliveries name: a repository or project path, or a
        numeric project id, as configured."""
        ...

    @property
    def secret(self) -> bytes | None:
        """The key deliveries are signed with; ``None``: every delivery is refused."""
        ...

    @property
    def max_issues(self) -> int:
        """A delivery naming more issues than this wakes one poll instead."""
        ...

    @property
    def known_id(self) -> int | None:
        """The source's stable id for what the endpoint syncs, once known."""
        ...

    @property
    def holds(self) -> Callable[[int | None, str | None], bool] | None:
        """A receiver over many projects (a GitLab group): whether a delivery's project
        (its stable id, its path) is one of them; ``None``: it names one project, by
        ``path`` and ``known_id``."""
        ...

    async def remembered_id(self) -> int | None:
        """The stable id an earlier verified delivery carried, kept beside the mirror."""
        ...

    async def remember_id(self, pid: int) -> None: ...

    def named(self, event: str, payload: Mapping[str, Any]) -> set[int] | None:
        """The issues a verified delivery names (``None``: nothing readable; counted as
        a degraded item, and the poll finds the change)."""
        ...

    async def lookup(self, event: str, payload: Mapping[str, Any]) -> Looked | None:
        """The issues only the source can name for this delivery, asked of it (raises
        ``SourceRefused`` when it does not answer); ``None``: none of this endpoint's,
        or an event no lookup serves."""
        ...

    async def first_delivery(self, delivery_id: str, *, moved: bool = False) -> bool:
        """Record ``delivery_id``; ``False`` when it was seen before (a redelivery).
        ``moved``: the delivery says the source moved beyond the issues it names, kept
        with the id (one commit), so the next poll, on whichever instance leads, reads
        what the source's tracker otherwise reads on its own cadence."""
        ...

    def remembers(self, delivery_id: str) -> bool:
        """Whether this process recorded ``delivery_id`` lately (memory only, nothing
        asked of the mirror: ``False`` says nothing), so a replay is answered before its
        body is decoded."""
        ...

    async def delivered(self, delivery_id: str) -> bool:
        """Whether ``delivery_id`` was recorded already (asked before a lookup, so a
        redelivery costs the source nothing); records nothing."""
        ...

    async def wake(self, numbers: set[int]) -> None:
        """Refresh these issues soon (none: poll), on the instance that syncs the
        endpoint (the poll stays the source of truth)."""
        ...

    async def reread(self) -> None:
        """Ask the next poll, on whichever instance leads, to read every issue again."""
        ...

    def covers(self, payload: Mapping[str, Any]) -> bool:
        """Whether a verified delivery is about where the endpoint discovers its sources
        (its organization, its App installation) though it names none of them: taken
        (a change of the set: discovered again) or ignored, never refused."""
        ...

    async def rediscover(self) -> None:
        """Discover the endpoint's sources again now (a webhook says the set changed)."""
        ...


class SyncRole(Protocol):
    """Whether this instance runs a mirrored source's sync loop, and since when."""

    @property
    def role(self) -> str: ...

    @property
    def since_ms(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class WebhookReply:
    status: int
    message: str


# One delivery (its headers, lower-case names, and its raw body) -> the reply.
Receive = Callable[[Mapping[str, str], bytes], Awaitable[WebhookReply]]


@dataclass(frozen=True, slots=True)
class Webhook:
    """A provider's webhook route ``POST /webhooks/<route>``. ``receiver`` is given the
    receivers of every endpoint of that provider and answers each delivery: it verifies
    it, finds the endpoint it is for, and tells that endpoint's receiver."""

    route: str
    receiver: Callable[[Sequence[WebhookReceiver]], Receive]


async def _nothing() -> None:
    return None


ChangeHook = Callable[[int], Awaitable[None]]  # changeSeq -> None
# Hear every change the store commits from its source (a sync, a file follower): the
# command service hears its own writes.
OnChange = Callable[[ChangeHook], None]
Progress = Callable[[int, int | None], None]  # (pages done, pages in all if known)


@dataclass(frozen=True, slots=True)
class CatchUpReport:
    """What one catch-up did, as the lines the CLI's ``sync`` prints (without the
    endpoint's name, which the CLI puts before each), and as figures for ``sync --json``
    (a hosted poll's counts: ``pages``, ``issues``, ``changed``, ...)."""

    lines: tuple[str, ...]
    figures: Mapping[str, Any] = field(default_factory=dict)


# Bring the store up to date with its source once (the CLI's ``sync``), reporting
# progress as it goes when given a ``Progress``.
CatchUp = Callable[[Progress | None], Awaitable[CatchUpReport]]
# The source's items mapped without a refused part, or skipped, since the process started:
# ``{"counts": {reason: n}, "recent": [...]}`` (``/healthz`` and the CLI's ``sync``).
Degradations = Callable[[], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RateBudget:
    """A source's rate-limit budget as its latest answer reported it: ``remaining``
    requests (or points) of ``limit``, refilled at ``reset_ms`` (epoch ms), read at
    ``read_ms``. ``resource`` is the pool the tracker names (GitHub's ``core``,
    ``graphql``); empty when it names none (GitLab, Jira). ``credential`` is the
    fingerprint of the credential whose budget it is (every endpoint using that credential
    shares it; never the secret); empty when not known."""

    remaining: int
    limit: int | None
    reset_ms: int | None
    read_ms: int
    resource: str = ""
    credential: str = ""

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"resource": self.resource} if self.resource else {}
        if self.credential:
            shown["credential"] = self.credential
        return shown | {
            "remaining": self.remaining,
            "limit": self.limit,
            "resetAt": self.reset_ms,
            "readAt": self.read_ms,
        }


# The latest rate-limit budget of each pool the source reported (none: not reported).
RateBudgets = Callable[[], Sequence[RateBudget]]


@dataclass
class Built:
    """One endpoint as its provider built it: the store, and what the endpoint can do.

    ``store`` is what the command service serves (its ``close`` closes the mirror too);
    ``json_reads`` the store's fast wire-form reads, where it has them (the board);
    ``runner`` a loop to run while serving (a sync loop, a file follower); ``sync_role``
    this instance's part in that loop, where instances elect who syncs; ``on_change``
    subscribes to the changes the store commits from its source; ``catch_up`` brings
    the store up to date once, with its report; ``degradations`` counts what the source
    gave that did not map in full; ``rate_budgets`` the rate-limit budget the source's
    answers last reported; ``webhooks`` the endpoint's receivers for its provider's
    route (one per source it reads: a repository, a project; read live, as an endpoint
    whose sources are discovered adds and removes them while it runs); ``close`` releases what
    ``build`` opened besides the store (an HTTP client). ``parts`` are the provider's own
    parts, for its tools and tests: the bridge never reads them.
    """

    store: TaskStore
    json_reads: JsonReads | None = None
    runner: Runner | None = None
    sync_role: SyncRole | None = None
    on_change: OnChange | None = None
    catch_up: CatchUp | None = None
    degradations: Degradations | None = None
    rate_budgets: RateBudgets | None = None
    webhooks: Sequence[WebhookReceiver] = ()
    parts: object | None = None
    close: Callable[[], Awaitable[None]] = field(default=_nothing)


S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Access:
    """What a tracker says its token may do: ``writes`` (``None``: it did not say) whether
    write-back (edit, assign, close) will be accepted, ``detail`` what it answered."""

    writes: bool | None
    detail: str
    remedy: str = ""  # how to give a read-only token what write-back needs


@dataclass(frozen=True)
class Provider(Generic[S]):
    """A provider's registry entry.

    ``name`` is what ``provider = "…"`` says; ``settings`` its settings model, tagged by a
    ``provider: Literal[name]`` field; ``section`` the endpoint's TOML table holding them
    (``None``: the provider has no settings of its own). ``describe`` gives the lines
    ``check-config`` prints; ``preview`` maps the ``count`` most recently updated items,
    writing nothing (``None``: nothing to preview, the endpoint is its own source);
    ``access`` asks the tracker what the token may do (``check-config --online``);
    ``reach`` is the first contact at start: one listing request, nothing else read, and
    how many items it listed (``None``: the preview of one item is the contact).
    """

    name: str
    settings: type[S]
    build: Callable[[S, BuildContext], Awaitable[Built]]
    section: str | None = None
    webhook: Webhook | None = None
    describe: Callable[[S], list[str]] = field(default=lambda settings: [])
    preview: Callable[[S, str, int], Awaitable[list[tuple[int, Task]]]] | None = None
    access: Callable[[S], Awaitable[Access]] | None = None  # the token's capabilities
    reach: Callable[[S], Awaitable[int]] | None = None  # one listing request

    @property
    def mirrors(self) -> bool:
        """Whether the endpoint mirrors a source outside the bridge (a tracker, a file)."""
        return self.preview is not None
