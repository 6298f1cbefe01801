"""One endpoint opened from its config: its store (a board, or a source over a board
mirror) and its command service, built through the provider registry.

No provider is named here: the endpoint's ``provider`` finds its registry entry, whose
``build`` gets the endpoint's local board store (the board itself, or a mirror), and runs
what it builds as built (a hosted tracker's runner is its sync under leader election).
What the endpoint can do is what its ``Built`` declares; nothing here asks a store or a
part what it is.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.service.commands import (
    CommandService,
    NoPresence,
    PresenceSource,
    ServiceSettings,
)
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.providers.board import BoardStore, BoardUnreachable
from cotal_tasks.providers.provider import (
    BuildContext,
    Built,
    CatchUp,
    Degradations,
    RateBudgets,
    Runner,
    SeatUids,
    SyncRole,
    WebhookReceiver,
    no_uids,
)
from cotal_tasks.providers.registry import provider
from cotal_tasks.providers.store import TaskStore


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An opened endpoint: its store and command service, and what its provider built."""

    config: EndpointConfig
    store: TaskStore
    service: CommandService
    location: str
    runner: Runner | None = None  # run while serving: a sync loop (elected), a file follower
    # its side of the provider's webhook route: one receiver per source it reads (live)
    webhooks: Sequence[WebhookReceiver] = ()
    parts: object | None = None  # the provider's own parts (for its tools and tests)
    catch_up: CatchUp | None = None  # bring the store up to date once (the CLI's sync)
    degradations: Degradations | None = None  # what the source gave that did not map
    sync_role: SyncRole | None = None  # this instance's part in an elected sync
    rate_budgets: RateBudgets | None = None  # the source's rate-limit budget last reported


def presence_uids(presence: PresenceSource | None) -> SeatUids:
    """A seat's current lifecycle uid from its fresh presence card, if it has one."""
    if presence is None:
        return no_uids

    async def uid_of(owner: str, actor: str) -> str | None:
        card = await presence.lookup(owner, actor)
        return card.lifecycleUid if card is not None and card.fresh else None

    return uid_of


async def open_store(
    config: BridgeConfig, endpoint: EndpointConfig, *, serve: bool = False, migrate: bool = True
) -> BoardStore:
    """The endpoint's board store; a database that cannot be opened (no answer within
    ``database_connect_timeout_s``, a refusal) is one line naming the endpoint's key."""
    url = endpoint.database_url(config.data_dir)
    try:
        return await BoardStore.open(
            url,
            serve=serve,
            migrate=migrate,
            connect_timeout_s=config.database_connect_timeout_s,
            endpoint=endpoint.name,
        )
    except BoardUnreachable as exc:
        index = config.endpoints.index(endpoint) if endpoint in config.endpoints else None
        key = "database" if index is None else f"endpoints.{index}.database"
        why = f"{exc.reason}; database_connect_timeout_s" if exc.timed_out else exc.reason
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"cannot open the database of endpoint {endpoint.name} at {mask_credentials(url)} "
            f"({why}). Check {key}, that the server runs and is reachable, and its credentials",
        ) from exc


async def build_endpoint(
    config: BridgeConfig,
    endpoint: EndpointConfig,
    board: BoardStore,
    *,
    presence: PresenceSource | None = None,
    metrics: Metrics | None = None,
) -> Built:
    """What the endpoint's provider builds over ``board`` (the caller closes ``board`` if
    this raises)."""
    context = BuildContext(
        endpoint.name,
        config.space,
        board,
        wall_clock_ms,
        json_reads=board,
        seat_uids=presence_uids(presence),
        metrics=metrics,
    )
    return await provider(endpoint.provider).build(endpoint.settings, context)


@asynccontextmanager
async def open_endpoint(
    config: BridgeConfig,
    endpoint: EndpointConfig,
    presence: PresenceSource | None = None,
    *,
    serve: bool = False,
    metrics: Metrics | None = None,
) -> AsyncIterator[Endpoint]:
    """Open the endpoint's store and its command service; close them on exit.

    ``serve`` is for the process that serves the endpoint (see ``BoardStore.open``). A
    mirroring endpoint's store is its source over a local board mirror.
    """
    board = await open_store(config, endpoint, serve=serve)
    try:
        built = await build_endpoint(config, endpoint, board, presence=presence, metrics=metrics)
    except BaseException:
        await board.close()
        raise
    store = built.store
    settings = ServiceSettings(
        space=config.space,
        page_ceiling=endpoint.page_ceiling,
        retention_ms=int(endpoint.idempotency_retention_hours * 3_600_000),
        require_presence=endpoint.require_presence,
        writes_per_minute_per_seat=endpoint.writes_per_minute_per_seat,
        note_max_bytes=endpoint.note_max_bytes,
        history_retention_ms=int(endpoint.history_retention_days * 86_400_000) or None,
    )
    try:
        service = CommandService(
            store,
            settings,
            wall_clock_ms,
            presence or NoPresence(),
            json_reads=built.json_reads,
        )
        if built.on_change is not None:
            built.on_change(service.announce)
        yield Endpoint(
            endpoint,
            store,
            service,
            board.label,
            runner=built.runner,
            webhooks=built.webhooks,
            parts=built.parts,
            catch_up=built.catch_up,
            degradations=built.degradations,
            sync_role=built.sync_role,
            rate_budgets=built.rate_budgets,
        )
    finally:
        await built.close()
        await store.close()
