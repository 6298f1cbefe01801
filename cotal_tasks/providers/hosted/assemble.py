"""Assembling a hosted tracker endpoint from its parts, for a tracker folder's ``build``.

A tracker's ``build`` makes its client and its ``Tracker``, then ``assemble`` puts the
store over the mirror, the sync loop and the webhook receiver around it. The sync loop is
the endpoint's runner; the bridge runs it under leader election (``Hosted``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.core.secrets import TRACKER_TOKEN, WEBHOOK_SECRET, SecretRule
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.credentials import CREDENTIALS
from cotal_tasks.providers.hosted.discovery import Discovery, Sources
from cotal_tasks.providers.hosted.http import RetryPolicy, TrackerHttp
from cotal_tasks.providers.hosted.leader import Election
from cotal_tasks.providers.hosted.ledger import Ledger
from cotal_tasks.providers.hosted.mirroring import ChangeHook, MirrorSync, Projection
from cotal_tasks.providers.hosted.preview import preview
from cotal_tasks.providers.hosted.sources import Hosted as Hosted
from cotal_tasks.providers.hosted.sources import (
    Roles,
    RoutedWrites,
    Source,
    SourcesHealth,
)
from cotal_tasks.providers.hosted.store import (
    Health,
    HostedStore,
    SyncHealth,
    tracker_error,
)
from cotal_tasks.providers.hosted.sync import SyncEngine
from cotal_tasks.providers.hosted.tracker import Tracker
from cotal_tasks.providers.hosted.webhook import ID_KEY, Scheme
from cotal_tasks.providers.hosted.writeback import WritePlan
from cotal_tasks.providers.hosted.writes import Writes
from cotal_tasks.providers.provider import (
    Access,
    BuildContext,
    Built,
    Provider,
    WebhookReceiver,
)
from cotal_tasks.providers.store import Mirror

log = logging.getLogger(__name__)


def sql_mirror(mirror: Mirror) -> BoardStore:
    """The mirror as the board store it must be: the hosted machinery keeps its write
    ledger, leases, checkpoints and wakes in the mirror's database, beside the tasks."""
    if not isinstance(mirror, BoardStore):
        raise ContractError(
            ErrorCode.FAILED_PRECONDITION,
            f"a hosted tracker's mirror keeps its write ledger in the board's database, and "
            f"{mirror.label} is not one. Give the endpoint a SQLite or PostgreSQL database",
        )
    return mirror


def secret(env: str | None, what: str, *, required: bool) -> str | None:
    if env is None:
        return None
    value = os.environ.get(env)
    if value is None and required:
        raise ContractError(
            ErrorCode.FAILED_PRECONDITION,
            f"{what} is read from the environment variable {env}, which is not set. Export it "
            "(the config names the variable, never the secret)",
        )
    return value


def checked_secret(env: str | None, rule: SecretRule, *, required: bool) -> str | None:
    """The secret in ``env`` when ``rule`` admits it (``check-config`` applies the same
    rule before ``serve`` starts); an empty, padded or short one is refused."""
    value = secret(env, rule.what, required=required)
    refusal = rule.refusal(env, value) if env is not None and value is not None else None
    if refusal is not None:
        raise ContractError(ErrorCode.FAILED_PRECONDITION, refusal)
    return value


def tracker_http(
    cfg: HostedConfig,
    tracker: str,
    client: Callable[[str, str, float], httpx.AsyncClient],
    retry: RetryPolicy,
) -> TrackerHttp:
    """The tracker's HTTP client, its token read from ``token_env`` (the caller closes it),
    sharing the rate-limit budget and pacing of every other client of the same token on
    the same ``tracker`` and API (``credentials``)."""
    token = checked_secret(cfg.token_env, TRACKER_TOKEN, required=True) or ""
    return TrackerHttp(
        client(cfg.api_url, token, cfg.request_timeout_s),
        retry,
        shared=CREDENTIALS.budget(tracker, cfg.api_url, token),
        rate_reserve=cfg.rate_reserve,
        mutation_spacing_s=cfg.mutation_spacing_s,
        max_in_flight=cfg.max_concurrent_requests,
        max_retries=cfg.max_retries,
        max_wait_s=cfg.max_rate_limit_wait_s,
        max_response_bytes=cfg.max_response_bytes,
        deadline_s=cfg.attempt_deadline_s,
        max_pages=cfg.max_pages,
        credential=cfg.token_env,
        source=" or ".join(cfg.sources) or cfg.discovery,
    )


def assemble(
    ctx: BuildContext,
    tracker: T,
    boundary: ItemBoundary,
    cfg: HostedConfig,
    http: TrackerHttp,
    *,
    plan: WritePlan,
    key: str,
    scheme: Scheme[T] | None,
    discovery: Discovery | None = None,
) -> Built:
    """The endpoint over ``tracker`` and its siblings, one per source of ``cfg`` (or, with
    ``discovery``, one per source it lists: ``Sources.start`` before it serves), each
    part handed what it uses: ``key`` (``<tracker>:``, then the source) names each
    source's sync checkpoint, ``scheme`` the webhook route (``None``: no deliveries)."""
    metrics, name = ctx.metrics, ctx.name
    prefix = key.split(":", 1)[0]  # the provider's name
    mirror = sql_mirror(ctx.mirror)
    if metrics is not None:
        http.on_response = lambda status: metrics.tracker_request(name, status)
        http.on_wait = lambda seconds: metrics.rate_limit_wait(name, seconds)
        http.on_paced = lambda cause, seconds: metrics.credential_wait(
            prefix, http.shared.fingerprint, cause, seconds
        )
        boundary.observers.append(lambda reason: metrics.degraded(name, reason))
    hooks: list[ChangeHook] = []
    secret = _webhook_secret(cfg, name) if scheme is not None else None
    first = cfg.sources[0] if cfg.sources else None

    def make(path: str) -> Source:
        return _source(
            ctx,
            mirror,
            tracker if path == first else tracker.sibling(path),
            boundary,
            cfg,
            plan=plan,
            source=path,
            key=f"{prefix}:{path}",
            scheme=scheme,
            secret=secret,
            hooks=hooks,
            id_key=ID_KEY if path == first else f"{ID_KEY}:{path}",
        )

    sources: list[Source] = [make(path) for path in cfg.sources]
    receivers: list[WebhookReceiver] = [s.webhook for s in sources if s.webhook is not None]
    discovering = None
    if discovery is not None:
        discovering = Sources(
            discovery,
            make,
            sources=sources,
            receivers=receivers,
            checkpoints=mirror.checkpoints(),
            key=f"{prefix}:discovered:{cfg.location}",
            clock=ctx.clock,
        )
        if scheme is not None:
            receivers.append(
                scheme.set_target(
                    tracker,
                    name=name,
                    secret=secret,
                    checkpoints=mirror.checkpoints(),
                    clock=ctx.clock,
                    max_issues=cfg.webhook_max_issues,
                    soon=discovering.soon,
                )
            )
    several = len(sources) > 1 or discovering is not None
    health: Health = SourcesHealth(sources, discovering) if several else sources[0].health
    store = HostedStore(
        mirror,
        sources[0].writes if sources else None,
        health,
        boundary,
        tracker=tracker.name,
        stale_after_s=cfg.stale_after_s,
        clock=ctx.clock,
        hooks=hooks,
        ledger=Ledger(mirror.checkpoints().engine),
        routes=RoutedWrites(sources, cfg.routed, cfg.discovery) if several else None,
    )
    hosted = Hosted(store, tracker, boundary, http, cfg, sources, discovering)
    return Built(
        store,
        runner=hosted,
        sync_role=Roles(sources) if several else sources[0].election,
        on_change=store.on_change,
        catch_up=hosted.catch_up,
        degradations=store.degradations,
        rate_budgets=http.shared.snapshot,
        webhooks=receivers,
        parts=hosted,
        close=hosted.close,
    )


def _source(
    ctx: BuildContext,
    mirror: BoardStore,
    tracker: T,
    boundary: ItemBoundary,
    cfg: HostedConfig,
    *,
    source: str,
    plan: WritePlan,
    key: str,
    scheme: Scheme[T] | None,
    secret: bytes | None,
    hooks: list[ChangeHook],
    id_key: str,
) -> Source:
    """The parts of ``source`` (as configured: what its webhook deliveries name) over the
    endpoint's mirror (``hooks``: the store's ``on_change``, told of what any source's
    sync commits)."""
    metrics, name = ctx.metrics, ctx.name
    checkpoints = mirror.checkpoints()
    projection = Projection(
        tracker,
        boundary,
        config=cfg,
        plan=plan,
        space=ctx.space,
        clock=ctx.clock,
        seat_uids=ctx.seat_uids,
    )
    writes = Writes(
        mirror,
        tracker,
        checkpoints,
        config=cfg,
        plan=plan,
        clock=ctx.clock,
        project=projection.record,
        error=lambda exc, outcome: tracker_error(tracker.name, exc, outcome),
    )
    health = SyncHealth()
    mirroring = MirrorSync(mirror, writes.ledger, projection, tracker, clock=ctx.clock, hooks=hooks)
    sync = SyncEngine(
        tracker,
        boundary,
        mirroring,
        checkpoints,
        key,
        ctx.clock,
        health,
        reconcile_interval_s=cfg.reconcile_interval_s,
        refreshes_per_minute=cfg.webhook_refreshes_per_minute,
        scope=cfg.scope,
    )
    if metrics is not None:
        sync.sweep_observers.append(
            lambda requests, reads: metrics.reconciled(name, requests, reads)
        )
    target = None
    if scheme is not None:
        target = scheme.target(
            tracker,
            name=name,
            path=source,
            secret=secret,
            checkpoints=checkpoints,
            sync=sync,
            boundary=boundary,
            clock=ctx.clock,
            max_issues=cfg.webhook_max_issues,
            id_key=id_key,
        )
    election = Election(
        sync, mirroring, checkpoints, health, cfg.poll_interval_s, ctx.clock, sync.holder
    )
    return Source(source, tracker, writes, mirroring, sync, election, health, target)


def _webhook_secret(cfg: HostedConfig, name: str) -> bytes | None:
    secret = checked_secret(cfg.webhook_secret_env, WEBHOOK_SECRET, required=False)
    if secret is None and cfg.webhook_secret_env is not None:
        log.warning(
            "%s: %s is not set, so every webhook delivery is refused (401); the poll "
            "still syncs. Export it and restart to take deliveries",
            name,
            cfg.webhook_secret_env,
        )
    return secret.encode() if secret is not None else None


def describe(provider: str, cfg: HostedConfig) -> list[str]:
    """What ``check-config`` prints about a hosted tracker's settings."""
    return [
        f"{provider} at {mask_credentials(cfg.api_url)}, token from ${cfg.token_env}, "
        f"poll every {cfg.poll_interval_s:g} s, stale after {cfg.stale_after_s:g} s",
        f"{len(cfg.status_rules)} status rules, {len(cfg.seats)} seats",
        *cfg.source_lines(),
        *(cfg.scope.lines() if cfg.scope.keys() else []),
        *([f"{provider} scope: {', '.join(cfg.native_keys())}"] if cfg.native_keys() else []),
    ]


C = TypeVar("C", bound=HostedConfig)
T = TypeVar("T", bound=Tracker)
# (settings, item boundary) -> the tracker over it and its HTTP client (the caller closes it)
OpenTracker = Callable[[C, ItemBoundary], tuple[T, TrackerHttp]]
# (settings, their HTTP client) -> how the tracker lists the sources, or ``None``: listed
Discover = Callable[[C, TrackerHttp], Discovery | None]


def provider(
    name: str,
    settings: type[C],
    open_tracker: OpenTracker[C, T],
    *,
    plan: Callable[[C], WritePlan],
    scheme: Scheme[T] | None,
    access: Callable[[C, TrackerHttp], Awaitable[Access]] | None = None,
    prepare: Callable[[T, C, BuildContext], Awaitable[None]] | None = None,
    discover: Discover[C] | None = None,
) -> Provider[C]:
    """A hosted tracker's registry entry: ``open_tracker`` makes its ``Tracker`` and HTTP
    client over the item boundary it is given, ``plan`` its write plan, ``scheme`` its
    webhook route, ``access`` asks what the token may do, ``prepare`` learns what
    the tracker must know before the endpoint serves (GitLab: a numeric project's path),
    and ``discover`` how a config whose sources the tracker lists finds them
    (``hosted.discovery``; ``None`` for a config that lists its own)."""

    def opened(config: C) -> tuple[T, ItemBoundary, TrackerHttp]:
        boundary = ItemBoundary(name)
        tracker, http = open_tracker(config, boundary)
        boundary.tracker = tracker.name
        return tracker, boundary, http

    def discovery(config: C, http: TrackerHttp) -> Discovery | None:
        return None if discover is None else discover(config, http)

    async def build(config: C, ctx: BuildContext) -> Built:
        tracker, boundary, http = opened(config)
        if prepare is not None:
            await prepare(tracker, config, ctx)
        key = f"{name}:{config.location}"
        found = discovery(config, http)
        built = assemble(
            ctx,
            tracker,
            boundary,
            config,
            http,
            plan=plan(config),
            key=key,
            scheme=scheme,
            discovery=found,
        )
        hosted = Hosted.of(built.parts)
        if hosted is not None and hosted.discovering is not None:
            await hosted.discovering.start()
        return built

    async def show(config: C, space: str, count: int) -> list[tuple[int, Task]]:
        tracker, _, http = opened(config)
        found = discovery(config, http)
        paths = config.sources
        if found is not None:
            try:
                paths = (await found.find()).paths
            except BaseException:
                await http.client.aclose()
                raise
        return await preview(tracker, config, http, paths, space=space, count=count)

    async def reach(config: C) -> int:
        tracker, _, http = opened(config)
        try:
            found = discovery(config, http)
            if found is not None:  # the listing of the sources is the first contact
                return len((await found.find()).paths)
            return len(await tracker.recent(1))  # the newest page, no issue or evidence read
        finally:
            await http.client.aclose()

    async def ask(config: C) -> Access:
        assert access is not None
        _, _, http = opened(config)
        try:
            return await access(config, http)
        finally:
            await http.client.aclose()

    return Provider(
        name,
        settings,
        build,
        section=name,
        webhook=None if scheme is None else scheme.webhook(),
        describe=lambda config: describe(name, config),
        preview=show,
        access=None if access is None else ask,
        reach=reach,
    )
