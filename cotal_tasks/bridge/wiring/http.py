"""The HTTP app assembled from the process's parts.

Everything the app needs is made ready here, before ``create_app`` sees it: the token
secrets are read from the environment (once), an event feed is attached to every
endpoint's change listener, each endpoint is reduced to what the routes read of it, and
each provider with a webhook gets its route over its endpoints' receivers."""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from starlette.applications import Starlette

from cotal_tasks.bridge.config import BridgeConfig, HttpLimits
from cotal_tasks.bridge.http.app import create_app
from cotal_tasks.bridge.http.auth import Tokens
from cotal_tasks.bridge.http.context import KEEPALIVE_S, HttpContext, ServedEndpoint
from cotal_tasks.bridge.http.events import EventHub
from cotal_tasks.bridge.http.presence import BrokerState, NoPresenceView, PresenceReader
from cotal_tasks.bridge.http.server import serve_http
from cotal_tasks.bridge.http.webhooks import refused_records, webhook_routes
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wiring.endpoints import Endpoint


@dataclass(frozen=True, slots=True)
class HttpApp:
    """The ASGI app and the event feed its streams read."""

    asgi: Starlette
    events: EventHub
    limits: HttpLimits

    def serve(self, host: str, port: int) -> AbstractAsyncContextManager[str]:
        """Listen on ``host:port`` (yielding the base URL) within ``limits``; on exit the
        open event streams end first, so the listener does not wait on them."""
        return serve_http(self.asgi, host, port, on_stop=self.events.close, limits=self.limits)


def served_endpoint(endpoint: Endpoint) -> ServedEndpoint:
    """What the routes read of an endpoint: a hosted one adds its sync election's role,
    its degradations and its rate-limit budget."""
    return ServedEndpoint(
        endpoint.config,
        endpoint.service,
        endpoint.sync_role,
        endpoint.degradations,
        endpoint.rate_budgets,
    )


def build_http_app(
    config: BridgeConfig,
    endpoints: Sequence[Endpoint],
    metrics: Metrics,
    *,
    presence: PresenceReader | None = None,
    broker: BrokerState | None = None,
    keepalive_s: float = KEEPALIVE_S,
) -> HttpApp:
    """The bridge's HTTP app over ``endpoints``. Raises ``ContractError`` when a token
    secret is missing or weak."""
    tokens = Tokens.load(config, os.environ)
    events = EventHub()
    for endpoint in endpoints:
        endpoint.service.add_listener(events.listener(endpoint.config.name))
    refused = refused_records()
    context = HttpContext(
        config,
        {endpoint.config.name: served_endpoint(endpoint) for endpoint in endpoints},
        metrics,
        tokens,
        events,
        webhook_routes=webhook_routes(
            [(ep.config.provider, ep.webhooks) for ep in endpoints],
            config.http.limits,
            refused,
        ),
        refused_deliveries=refused,
        presence=presence if presence is not None else NoPresenceView(),
        broker=broker,
        keepalive_s=keepalive_s,
    )
    return HttpApp(create_app(context), events, config.http.limits)
