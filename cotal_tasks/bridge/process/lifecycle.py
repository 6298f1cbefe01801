"""The bridge process: connect (or start) the broker, publish the contract, serve every
endpoint, and shut down cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.client import Server

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.http.app import HttpContext, create_app
from cotal_tasks.bridge.http.presence import KvPresenceView
from cotal_tasks.bridge.http.server import serve_http
from cotal_tasks.bridge.http.webhooks import webhook_routes
from cotal_tasks.bridge.process.broker import BrokerError, EmbeddedNats
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.bridge.wire.server import EndpointServer
from cotal_tasks.bridge.wire.space import (
    KvPresence,
    LifecycleHeads,
    ensure_space,
    publish_artifacts,
)
from cotal_tasks.bridge.wiring import Endpoint, open_endpoint
from cotal_tasks.client.wire import flush_queued
from cotal_tasks.core import ContractError, ErrorCode, contract_artifacts, endpoint_token
from cotal_tasks.providers.provider import Runner

log = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.25
_BACKOFF_CAP_S = 10.0


def jittered_backoff(servers: list[Server], _info: dict[str, Any]) -> tuple[Server | None, float]:
    """The next server (the one tried least, so a cluster's other nodes are tried in turn)
    and the reconnect delay: exponential in the attempts so far, capped, with jitter."""
    attempts = min((server.reconnects for server in servers), default=0)
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempts)
    least = min(servers, key=lambda server: server.reconnects, default=None)
    return least, random.uniform(ceiling / 2, ceiling)


def server_urls(url: str) -> list[str]:
    """``nats_url`` may list several nodes of a cluster, comma-separated, nearest first."""
    return [part.strip() for part in url.split(",") if part.strip()]


async def _log_nats_error(exc: Exception) -> None:
    log.warning("NATS connection: %s: %s", type(exc).__name__, exc)


async def connect(config: BridgeConfig, url: str) -> NATS:
    nc = NATS()

    async def log_disconnect() -> None:
        if not (nc.is_closed or nc.is_draining):
            log.warning("NATS connection to %s lost; reconnecting with backoff", url)

    async def log_reconnect() -> None:
        log.warning("NATS connection to %s restored", url)

    options: dict[str, Any] = {
        "name": "cotal-tasks",
        "error_cb": _log_nats_error,
        "disconnected_cb": log_disconnect,
        "reconnected_cb": log_reconnect,
        "max_reconnect_attempts": -1,
        "reconnect_to_server_handler": jittered_backoff,
        "connect_timeout": 5,
        "dont_randomize": True,  # the listed order: the nearest node first
    }
    if config.nats_credentials is not None:
        options["user_credentials"] = str(config.nats_credentials)
    if config.nats_user is not None:
        options["user"] = config.nats_user
        if config.nats_password_env is not None:
            password = os.environ.get(config.nats_password_env)
            if password is None:
                raise ContractError(
                    ErrorCode.FAILED_PRECONDITION,
                    f"nats_password_env names {config.nats_password_env}, which is not set; "
                    "export it before starting the bridge",
                )
            options["password"] = password
    try:
        await nc.connect(server_urls(url), **options)
    except (OSError, nats.errors.Error, TimeoutError) as exc:
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"cannot connect to NATS at {url} ({type(exc).__name__}); check nats_url and the "
            "credentials, or leave nats_url unset for the embedded broker",
        ) from exc
    return nc


@dataclass
class Bridge:
    """A running bridge: its broker URL, connection, endpoint servers and HTTP listener."""

    config: BridgeConfig
    url: str
    nc: NATS
    metrics: Metrics
    endpoints: list[Endpoint] = field(default_factory=list)
    servers: list[EndpointServer] = field(default_factory=list)
    embedded: bool = False
    http_url: str | None = None


ServedHook = Callable[[str, str, float], None]


@asynccontextmanager
async def running_bridge(
    config: BridgeConfig, *, on_served: ServedHook | None = None
) -> AsyncIterator[Bridge]:
    """Start everything the config describes; stop it all, in order, on exit.

    ``on_served(command, code, seconds)`` hears every answered request, beside metrics.
    """
    async with AsyncExitStack() as stack:
        url = config.nats_url
        broker: EmbeddedNats | None = None
        if url is None:
            broker = EmbeddedNats(config.data_dir / "nats")
            try:
                url = await broker.start()
            except BrokerError as exc:
                raise ContractError(ErrorCode.FAILED_PRECONDITION, str(exc)) from exc
            stack.push_async_callback(broker.stop)
            # Local callers (cotal-tasks invoke/describe) find the private broker here.
            embedded_url_file(config).write_text(url + "\n", encoding="utf-8")
            stack.callback(embedded_url_file(config).unlink, missing_ok=True)
        nc = await connect(config, url)
        stack.push_async_callback(_close, nc)
        js = nc.jetstream()
        if broker is not None:
            await ensure_space(js, config.space)
        await publish_artifacts(js, config.space, contract_artifacts().all())
        metrics = Metrics()
        bridge = Bridge(config, url, nc, metrics, embedded=broker is not None)
        presence = KvPresence(js, config.space)
        lifecycle = LifecycleHeads(js, config.space)
        for endpoint_config in config.endpoints:
            endpoint = await stack.enter_async_context(
                open_endpoint(config, endpoint_config, presence, serve=True, metrics=metrics)
            )
            identity = next_incarnation(config.data_dir, endpoint_token(endpoint_config.name))
            name = endpoint_config.name
            server = EndpointServer(
                nc,
                config.space,
                endpoint_config.name,
                config.owner,
                identity,
                endpoint.service,
                presence,
                lifecycle,
                target_check=endpoint_config.target_check,
                on_served=_served(metrics, name, on_served),
            )
            await server.start()
            stack.push_async_callback(server.stop)
            endpoint.service.add_listener(_gauge(metrics, name))
            if endpoint.runner is not None:
                _start(stack, endpoint.runner)
            bridge.endpoints.append(endpoint)
            bridge.servers.append(server)
        if config.http.enabled:
            context = HttpContext(
                config,
                {ep.config.name: ep for ep in bridge.endpoints},
                metrics=metrics,
                webhook_routes=webhook_routes(bridge.endpoints),
                presence=KvPresenceView(js, config.space, nc),
                broker=nc,
            )
            bridge.http_url = await stack.enter_async_context(
                serve_http(
                    create_app(context),
                    config.http.host,
                    config.http.port,
                    on_stop=context.close,
                )
            )
        await flush_queued(nc)  # every subscription is in place at the broker before serving
        yield bridge


def _start(stack: AsyncExitStack, runner: Runner) -> None:
    """Run the endpoint's background loop (a sync loop under leader election, a file
    follower) until the bridge stops."""
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))

    async def halt() -> None:
        stop.set()
        await task

    stack.push_async_callback(halt)


def _served(metrics: Metrics, endpoint: str, hook: ServedHook | None) -> ServedHook:
    def served(command: str, code: str, seconds: float) -> None:
        metrics.command_served(endpoint, command, code, seconds)
        if hook is not None:
            hook(command, code, seconds)

    return served


def _gauge(metrics: Metrics, endpoint: str) -> Callable[[int, int], Awaitable[None]]:
    async def record(change_seq: int, _observed_at: int) -> None:
        metrics.changed(endpoint, change_seq)

    return record


def embedded_url_file(config: BridgeConfig) -> Path:
    return config.data_dir / "nats.url"


def broker_url(config: BridgeConfig) -> str:
    """The broker a local caller should use: the configured one, or the running embedded one."""
    if config.nats_url is not None:
        return config.nats_url
    try:
        return embedded_url_file(config).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ContractError(
            ErrorCode.UNAVAILABLE,
            f"no nats_url is configured and no embedded broker is running under "
            f"{config.data_dir}; start the bridge first (make run), or set nats_url",
        ) from exc


async def _close(nc: NATS) -> None:
    """Drain, then close; a broker already gone must not turn a clean stop into an error."""
    with contextlib.suppress(Exception):
        await nc.drain()
    if not nc.is_closed:
        with contextlib.suppress(Exception):
            await nc.close()


async def serve_until_signalled(config: BridgeConfig, announce: Callable[[Bridge], None]) -> None:
    """Run the bridge until SIGINT or SIGTERM, then stop it cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with running_bridge(config) as bridge:
            announce(bridge)
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
