"""The whole bridge process, assembled from its config and taken apart in reverse order.

``running_bridge`` starts, in order:

1. the broker: the configured one, or a private nats-server when ``nats_url`` is unset
   (its URL written where local callers find it), and the connection to it;
2. the space's contract artifacts (and, on the embedded broker, the space itself);
3. per endpoint: its store and command service, its wire server, the service's change
   listeners (``board-changed`` on the wire, the metrics gauge), and its background loop
   (a hosted tracker's sync loop under leader election, or a tower-do board's follower);
4. the HTTP listener, over every endpoint.

Leaving the block stops everything in reverse order: the listener, the loops, the wire
servers (each answering what it already took), the stores, the connection, the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.http.presence import KvPresenceView
from cotal_tasks.bridge.logs import log_context
from cotal_tasks.bridge.process.broker import BrokerError, EmbeddedNats
from cotal_tasks.bridge.process.connection import close_connection, connect, embedded_url_file
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.bridge.wire.server import EndpointServer
from cotal_tasks.bridge.wire.space import (
    KvPresence,
    LifecycleHeads,
    ensure_space,
    publish_artifacts,
)
from cotal_tasks.bridge.wiring.endpoints import Endpoint, open_endpoint
from cotal_tasks.bridge.wiring.http import HttpApp, build_http_app
from cotal_tasks.client.wire import flush_queued
from cotal_tasks.core import ContractError, ErrorCode, contract_artifacts, endpoint_token
from cotal_tasks.core.ceiling import max_payload_bytes
from cotal_tasks.files import private_dir, write_private

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0  # a background loop's work in flight at a stop, before it is cancelled
ServedHook = Callable[[str, str, float], None]
BackgroundLoop = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


@dataclass
class Bridge:
    """A running bridge: its broker URL, connection, endpoint servers, and the HTTP app
    with the URL it listens on."""

    config: BridgeConfig
    url: str
    nc: NATS
    metrics: Metrics
    endpoints: list[Endpoint] = field(default_factory=list)
    servers: list[EndpointServer] = field(default_factory=list)
    embedded: bool = False
    http_app: HttpApp | None = None
    http_url: str | None = None


@asynccontextmanager
async def running_bridge(
    config: BridgeConfig, *, on_served: ServedHook | None = None
) -> AsyncIterator[Bridge]:
    """Start everything the config describes; stop it all, in reverse order, on exit.

    ``on_served(command, code, seconds)`` hears every answered request, beside metrics.
    """
    async with AsyncExitStack() as stack:
        private_dir(config.data_dir)  # 0700: everything the bridge keeps is its user's
        url, embedded = await _open_broker(stack, config)
        nc = await connect(config, url)
        stack.push_async_callback(close_connection, nc)
        js = nc.jetstream()
        if embedded:
            await ensure_space(js, config.space)
        await publish_artifacts(js, config.space, contract_artifacts().all())
        bridge = Bridge(config, url, nc, Metrics(), embedded=embedded)
        presence = KvPresence(js, config.space)
        lifecycle = LifecycleHeads(js, config.space)
        for endpoint_config in config.endpoints:
            endpoint = await stack.enter_async_context(
                open_endpoint(config, endpoint_config, presence, serve=True, metrics=bridge.metrics)
            )
            name = endpoint_config.name
            server = EndpointServer(
                nc,
                config.space,
                name,
                config.owner,
                next_incarnation(config.data_dir, endpoint_token(name)),
                endpoint.service,
                presence,
                lifecycle,
                target_check=endpoint_config.target_check,
                on_served=_served(bridge.metrics, name, on_served),
            )
            await server.start()
            stack.push_async_callback(server.stop)
            endpoint.service.add_listener(server.publish_board_changed)
            endpoint.service.add_listener(_change_gauge(bridge.metrics, name))
            if endpoint.runner is not None:
                _run_in_background(stack, endpoint.runner.run, name)
            bridge.endpoints.append(endpoint)
            bridge.servers.append(server)
        if config.http.enabled:
            bridge.http_app = build_http_app(
                config,
                bridge.endpoints,
                bridge.metrics,
                presence=KvPresenceView(js, config.space, nc),
                broker=nc,
            )
            bridge.http_url = await stack.enter_async_context(
                bridge.http_app.serve(config.http.host, config.http.port)
            )
        await flush_queued(nc)  # every subscription is in place at the broker before serving
        yield bridge


async def _open_broker(stack: AsyncExitStack, config: BridgeConfig) -> tuple[str, bool]:
    """The broker's URL, and whether it is the private nats-server started here."""
    if config.nats_url is not None:
        return config.nats_url, False
    # Its payload limit sits at what the bridge needs and no more: the largest valid
    # request, or the largest reply (a page at the highest page ceiling served), whichever
    # is larger. A body over it is refused by the broker at the sender.
    page_ceiling = max(endpoint.page_ceiling for endpoint in config.endpoints)
    broker = EmbeddedNats(config.data_dir / "nats", max_payload=max_payload_bytes(page_ceiling))
    try:
        url = await broker.start()
    except BrokerError as exc:
        raise ContractError(ErrorCode.FAILED_PRECONDITION, str(exc)) from exc
    stack.push_async_callback(broker.stop)
    # Local callers (cotal-tasks invoke/describe) find the private broker here.
    write_private(embedded_url_file(config), url + "\n")
    stack.callback(embedded_url_file(config).unlink, missing_ok=True)
    return url, True


def _run_in_background(stack: AsyncExitStack, loop: BackgroundLoop, endpoint: str) -> None:
    """Run ``loop(stop)`` (a sync loop's election, a board file's follower) until the
    bridge stops; then set ``stop`` and give the loop ``STOP_GRACE_S`` to finish the work
    in flight (a tracker request, a page) before it is cancelled; the checkpoint after
    every page means a cancelled sync resumes where it was."""
    stop = asyncio.Event()
    context = contextvars.copy_context()
    context.run(log_context, endpoint=endpoint)  # the loop's log lines name its endpoint
    task = asyncio.create_task(loop(stop), context=context)

    async def halt() -> None:
        stop.set()
        _, pending = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if pending:
            log.warning("a background loop did not stop within %g s; cancelling it", STOP_GRACE_S)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    stack.push_async_callback(halt)


def _served(metrics: Metrics, endpoint: str, hook: ServedHook | None) -> ServedHook:
    def served(command: str, code: str, seconds: float) -> None:
        metrics.command_served(endpoint, command, code, seconds)
        if hook is not None:
            hook(command, code, seconds)

    return served


def _change_gauge(metrics: Metrics, endpoint: str) -> Callable[[int, int], Awaitable[None]]:
    async def record(change_seq: int, _observed_at: int) -> None:
        metrics.changed(endpoint, change_seq)

    return record
