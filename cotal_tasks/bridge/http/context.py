"""What the HTTP routes may use, built by the composition root and shared by every route.

The app only reads it: the token secrets are loaded, and the event feed is attached to
every endpoint's change listener, before the app is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from starlette.requests import Request
from starlette.routing import BaseRoute

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.http.auth import Tokens
from cotal_tasks.bridge.http.events import EventHub
from cotal_tasks.bridge.http.presence import BrokerState, NoPresenceView, PresenceReader
from cotal_tasks.bridge.http.refusals import RefusedDeliveries
from cotal_tasks.bridge.service.commands import CommandService
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.provider import Degradations, RateBudgets, SyncRole

KEEPALIVE_S = 15.0


@dataclass(frozen=True, slots=True)
class ServedEndpoint:
    """What the routes read of one endpoint: its config, its command service (and through
    it the store), this instance's sync role when the endpoint mirrors a tracker, the
    count of source items that did not map in full, where its provider keeps one, and the
    rate-limit budget the source last reported, where its provider reads one."""

    config: EndpointConfig
    service: CommandService
    sync: SyncRole | None = None
    degradations: Degradations | None = None
    rate_budgets: RateBudgets | None = None


@dataclass(frozen=True)
class HttpContext:
    """The endpoints the bridge serves, the config, metrics, the loaded token secrets, the
    event feed (already hearing every endpoint's changes), the webhook routes hosted
    providers contribute and the deliveries they refused (by provider), the presence view
    for the dashboard's liveness column, and the broker connection for health."""

    config: BridgeConfig
    endpoints: Mapping[str, ServedEndpoint]
    metrics: Metrics
    tokens: Tokens
    events: EventHub
    webhook_routes: Sequence[BaseRoute] = ()
    refused_deliveries: Mapping[str, RefusedDeliveries] = field(default_factory=dict)
    presence: PresenceReader = field(default_factory=NoPresenceView)
    broker: BrokerState | None = None
    keepalive_s: float = KEEPALIVE_S

    def endpoint(self, name: str) -> ServedEndpoint:
        found = self.endpoints.get(name)
        if found is None:
            known = ", ".join(sorted(self.endpoints)) or "none"
            raise ContractError(
                ErrorCode.NOT_FOUND,
                f"this bridge serves no endpoint {name!r}. Name one it serves: {known} "
                "(GET /v1/endpoints lists them)",
            )
        return found


def context_of(request: Request) -> HttpContext:
    return cast(HttpContext, request.app.state.context)


def tokens_of(request: Request) -> Tokens:
    return context_of(request).tokens
