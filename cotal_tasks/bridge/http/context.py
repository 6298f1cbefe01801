"""What the HTTP routes may use, built by the composition root and shared by every route."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from starlette.requests import Request
from starlette.routing import BaseRoute

from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.http.auth import Tokens
from cotal_tasks.bridge.http.events import EventHub
from cotal_tasks.bridge.http.presence import BrokerState, NoPresenceView, PresenceReader
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wiring import Endpoint
from cotal_tasks.core import ContractError, ErrorCode

KEEPALIVE_S = 15.0


@dataclass
class HttpContext:
    """The endpoints the bridge serves (each with its command service and store), the
    config, metrics, the webhook routes hosted providers contribute, the presence view
    for the dashboard's liveness column, and the broker connection for health."""

    config: BridgeConfig
    endpoints: dict[str, Endpoint]
    metrics: Metrics
    webhook_routes: list[BaseRoute] = field(default_factory=list)
    presence: PresenceReader = field(default_factory=NoPresenceView)
    broker: BrokerState | None = None
    keepalive_s: float = KEEPALIVE_S
    # Where token secrets are read from (``os.environ`` when None), once, at create_app.
    environ: Mapping[str, str] | None = None
    events: EventHub = field(default_factory=EventHub)
    tokens: Tokens | None = None  # set by create_app

    def endpoint(self, name: str) -> Endpoint:
        found = self.endpoints.get(name)
        if found is None:
            known = ", ".join(sorted(self.endpoints)) or "none"
            raise ContractError(
                ErrorCode.NOT_FOUND,
                f"this bridge serves no endpoint {name!r}. Name one it serves: {known} "
                "(GET /v1/endpoints lists them)",
            )
        return found

    def close(self) -> None:
        """End the open event streams, so the listener can stop without waiting on them."""
        self.events.close()


def context_of(request: Request) -> HttpContext:
    return cast(HttpContext, request.app.state.context)


def tokens_of(request: Request) -> Tokens:
    tokens = context_of(request).tokens
    assert tokens is not None, "create_app loads the tokens"
    return tokens
