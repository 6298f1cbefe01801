"""What a provider is to the bridge: one entry in the registry, and what its ``build`` returns.

A provider is one folder under ``providers/`` (``board``, ``github``, ``gitlab``,
``tower_do``): its settings model (the endpoint's ``[endpoints.<section>]`` table, tagged
by a ``provider`` literal), and a ``Provider`` entry naming its ``build`` and what else it
offers (a webhook route, a description for ``check-config``, a preview). The bridge's
composition root opens the endpoint's local board store, calls ``build`` with it, and runs
what comes back; nothing in the bridge asks which tracker it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from pydantic import BaseModel

from cotal_tasks.core import Task
from cotal_tasks.providers.store import TaskStore

if TYPE_CHECKING:  # the board imports this module; a runtime import would be circular
    from cotal_tasks.providers.board import BoardStore

SeatUids = Callable[[str, str], Awaitable[str | None]]  # (owner, actor) -> current uid


async def no_uids(owner: str, actor: str) -> str | None:
    return None


class TrackerMetrics(Protocol):
    """Where a provider reports its traffic with the tracker (the bridge's metrics)."""

    def tracker_request(self, endpoint: str, status: str) -> None: ...

    def rate_limit_wait(self, endpoint: str, seconds: float) -> None: ...

    def degraded(self, endpoint: str, reason: str) -> None: ...

    def reconciled(self, endpoint: str, requests: int, reads: int) -> None: ...


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What every provider's ``build`` receives besides its own settings."""

    name: str  # the endpoint's name
    space: str
    mirror: BoardStore  # the endpoint's local board store: the board itself, or a mirror
    clock: Callable[[], int]  # wall clock, milliseconds
    seat_uids: SeatUids = no_uids  # a seat's current lifecycle uid, from its presence card
    metrics: TrackerMetrics | None = None


class Runner(Protocol):
    """A background loop the bridge runs while it serves the endpoint."""

    async def run(self, stop: asyncio.Event) -> None: ...


class WebhookReceiver(Protocol):
    """An endpoint's side of its provider's webhook route: what a verified delivery may
    do to the endpoint. The route never reaches past it into the store or the mirror."""

    @property
    def name(self) -> str: ...

    async def first_delivery(self, delivery_id: str) -> bool:
        """Record ``delivery_id``; ``False`` when it was seen before (a redelivery)."""
        ...

    async def wake(self, numbers: set[int]) -> None:
        """Refresh these issues soon, on the instance that syncs the endpoint (the poll
        stays the source of truth)."""
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


@dataclass
class Built:
    """One endpoint as its provider built it.

    ``store`` is what the command service serves (its ``close`` closes the mirror too);
    ``runner`` a loop to run while serving (a sync loop, a file follower); ``sync_role``
    this instance's part in that loop, where instances elect who syncs; ``webhook`` the
    endpoint's receiver for its provider's route; ``parts`` the provider's own parts, for
    its tools and tests; ``catch_up`` brings the store up to date once (``sync``);
    ``close`` releases what ``build`` opened besides the store (an HTTP client).
    """

    store: TaskStore
    runner: Runner | None = None
    webhook: WebhookReceiver | None = None
    parts: object | None = None
    catch_up: Callable[[], Awaitable[str]] | None = None
    sync_role: SyncRole | None = None
    close: Callable[[], Awaitable[None]] = field(default=_nothing)


S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True)
class Provider(Generic[S]):
    """A provider's registry entry.

    ``name`` is what ``provider = "…"`` says; ``settings`` its settings model, tagged by a
    ``provider: Literal[name]`` field; ``section`` the endpoint's TOML table holding them
    (``None``: the provider has no settings of its own). ``describe`` gives the lines
    ``check-config`` prints; ``preview`` maps the ``count`` most recently updated items,
    writing nothing (``None``: nothing to preview, the endpoint is its own source).
    """

    name: str
    settings: type[S]
    build: Callable[[S, BuildContext], Awaitable[Built]]
    section: str | None = None
    webhook: Webhook | None = None
    describe: Callable[[S], list[str]] = field(default=lambda settings: [])
    preview: Callable[[S, str, int], Awaitable[list[tuple[int, Task]]]] | None = None

    @property
    def mirrors(self) -> bool:
        """Whether the endpoint mirrors a source outside the bridge (a tracker, a file)."""
        return self.preview is not None
