"""``GET /healthz`` and ``GET /metrics``.

``/healthz`` answers while the process lives (``live: true``) and reports readiness per
endpoint: the broker connection is up and the store answers a one-task page read (not
a cached counter). It carries the endpoint's ``changeSeq``, the ``stale`` marker when
the store reports one (``freshness()``), and ``lastSync`` when the store reports the
time of its last successful sync (a mirror's ``sync_state()``),
and ``degraded`` (counts by reason and the latest few) when the endpoint counts the
tracker items it mapped without a refused part or skipped (its ``Built.degradations``).
The status is 200 when every endpoint is ready and 503 otherwise; a stale endpoint is
ready (it serves labelled reads), and says so; an endpoint whose source refuses the sync
until the operator acts (a wrong token, no access, no such repository; a tower-do board
that is a link, a FIFO or unreadable: ``SyncState.refused``) is not ready, and
``notReady`` says why. A hosted endpoint also says whether this
instance is its sync ``leader`` or a ``follower`` (``sync.role``): both are ready, and
exactly one instance per endpoint should say leader. Where the provider reads its
tracker's rate-limit headers (``Built.rate_budgets``), ``sync.rateLimits`` lists the budget
each pool last reported (``remaining`` of ``limit``, ``resetAt``, ``readAt``; empty: the
tracker reported none) to any endpoint using the same token, whose fingerprint
``credential`` names (endpoints showing one fingerprint share one budget). Where the
endpoint's provider takes webhooks, ``webhooks`` counts the deliveries its route refused
as unauthenticated (no secret verifies them: a wrong secret on the tracker, or a
stranger) since the bridge started, with the latest one's time and reason (``refused``,
``lastRefusedAt``, ``lastRefusal``). An endpoint over several sources
(repositories, projects) lists each one's state under ``sync.sources``
(``source``, ``lastSync``, ``failing``, ``failingSince``, ``refused``): a source the
tracker refuses for good is shown there and leaves the endpoint ready on the others.

All of that is for a caller holding ``tasks.read`` (a bearer token, or the local reader):
it names files and quotes tracker errors. A caller without one (a load balancer's probe,
or a stranger) sees the status, liveness and, per endpoint, ``ready`` alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.requests import Request
from starlette.responses import Response

from cotal_tasks.bridge.http.auth import READ
from cotal_tasks.bridge.http.context import ServedEndpoint, context_of, tokens_of
from cotal_tasks.bridge.http.refusals import RefusedDeliveries
from cotal_tasks.bridge.http.responses import json_answer
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.store import PageQuery

PROBE_TIMEOUT_S = 5.0


async def _probe(
    endpoint: ServedEndpoint, broker_up: bool, refusals: RefusedDeliveries | None = None
) -> dict[str, Any]:
    store = endpoint.service.store
    entry: dict[str, Any] = {"provider": endpoint.config.provider}
    refused: str | None = None  # a permanent refusal of the source: not ready, and why
    sources: list[dict[str, Any]] = []  # an endpoint over several sources: each one's state
    try:
        await asyncio.wait_for(store.page(PageQuery(limit=1)), PROBE_TIMEOUT_S)
        entry["changeSeq"] = await asyncio.wait_for(store.change_seq(), PROBE_TIMEOUT_S)
        stale = await asyncio.wait_for(store.freshness(), PROBE_TIMEOUT_S)
        if stale is not None:
            entry["stale"] = stale.to_json()
        synced = await asyncio.wait_for(store.sync_state(), PROBE_TIMEOUT_S)
        if synced is not None and synced.last_success_ms is not None:
            entry["lastSync"] = synced.last_success_ms
        if synced is not None and synced.refused:
            refused = f"the source refuses the sync: {synced.failing}"
        if synced is not None:
            sources = [source.to_json() for source in synced.sources]
        if endpoint.degradations is not None:
            entry["degraded"] = endpoint.degradations()
        readable = True
    except ContractError as exc:
        readable = False
        entry["error"] = {"code": exc.code.value, "message": exc.message}
    except TimeoutError:
        readable = False
        entry["error"] = {
            "code": ErrorCode.UNAVAILABLE.value,
            "message": f"the store did not answer within {PROBE_TIMEOUT_S:g} s; check the "
            "database, then retry",
        }
    sync: dict[str, Any] = {}
    if endpoint.sync is not None:
        sync |= {"role": endpoint.sync.role, "since": endpoint.sync.since_ms}
    if endpoint.rate_budgets is not None:
        sync["rateLimits"] = [budget.to_json() for budget in endpoint.rate_budgets()]
    if sources:
        sync["sources"] = sources
    if sync:
        entry["sync"] = sync
    if refusals is not None:
        entry["webhooks"] = refusals.to_json()
    entry["storeReadable"] = readable
    entry["brokerConnected"] = broker_up
    entry["ready"] = readable and broker_up and refused is None
    if refused is not None:
        entry["notReady"] = refused
    return entry


async def healthz(request: Request) -> Response:
    ctx = context_of(request)
    broker_up = ctx.broker.is_connected if ctx.broker is not None else True
    names = list(ctx.endpoints)
    probes = await asyncio.gather(
        *(
            _probe(
                ctx.endpoints[name],
                broker_up,
                ctx.refused_deliveries.get(ctx.endpoints[name].config.provider),
            )
            for name in names
        )
    )
    endpoints = dict(zip(names, probes, strict=True))
    for name, entry in endpoints.items():
        _record(ctx.metrics, name, entry)
    ready = broker_up and all(entry["ready"] for entry in endpoints.values())
    status = {"status": "ok" if ready else "degraded", "live": True}
    if not _may_see_details(request):
        brief = {name: {"ready": entry["ready"]} for name, entry in endpoints.items()}
        return json_answer({**status, "endpoints": brief}, 200 if ready else 503)
    body = {**status, "broker": {"connected": broker_up}, "endpoints": endpoints}
    return json_answer(body, 200 if ready else 503)


def _may_see_details(request: Request) -> bool:
    """Whether the caller holds ``tasks.read``; a missing or unknown token is no refusal
    here (a health probe carries none), only the brief answer."""
    try:
        grant = tokens_of(request).authenticate(request)
    except ContractError:
        return False
    return READ in grant.capabilities


def _record(metrics: Metrics, name: str, entry: dict[str, Any]) -> None:
    """The gauges of one endpoint's probe (the gauge of a value it could not read keeps
    the last value it saw; /healthz says why)."""
    if "changeSeq" in entry:
        metrics.changed(name, entry["changeSeq"])
    sync = entry.get("sync", {})
    metrics.endpoint_state(
        name,
        ready=entry["ready"],
        stale="stale" in entry,
        last_success_ms=entry.get("lastSync"),
        leader=sync["role"] == "leader" if "role" in sync else None,
    )
    if entry["storeReadable"]:  # a source no longer listed (it left) loses its gauges
        metrics.sources_now(name, {source["source"] for source in sync.get("sources", ())})
    for source in sync.get("sources", ()):
        metrics.source_state(
            name,
            source["source"],
            failing=source["failing"] is not None,
            refused=source["refused"],
            last_success_ms=source["lastSync"],
        )
    for budget in sync.get("rateLimits", ()):
        pool = budget.get("resource", "")
        figures = (budget["remaining"], budget["limit"], budget["resetAt"])
        metrics.rate_budget(name, pool, *figures)
        if "credential" in budget:
            metrics.credential_budget(entry["provider"], budget["credential"], pool, *figures)


async def metrics(request: Request) -> Response:
    ctx = context_of(request)
    broker_up = ctx.broker.is_connected if ctx.broker is not None else True
    names = list(ctx.endpoints)
    probes = await asyncio.gather(*(_probe(ctx.endpoints[name], broker_up) for name in names))
    for name, entry in zip(names, probes, strict=True):
        _record(ctx.metrics, name, entry)
    return Response(
        ctx.metrics.render(),
        media_type=CONTENT_TYPE_PLAIN_0_0_4,
        headers={"Cache-Control": "no-store"},
    )
