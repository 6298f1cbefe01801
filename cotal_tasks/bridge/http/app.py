"""Assemble the HTTP application from its parts.

``HttpContext`` is everything the routes may use: the endpoints the bridge serves (each
with its command service and store), the bridge config, and the webhook routes the
hosted providers contribute. Only the composition root builds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from cotal_tasks.bridge.app import Endpoint
from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.metrics import Metrics


@dataclass
class HttpContext:
    config: BridgeConfig
    endpoints: dict[str, Endpoint]
    metrics: Metrics
    webhook_routes: list[BaseRoute] = field(default_factory=list)


def create_app(context: HttpContext, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    app = Starlette(routes=[*extra_routes, *context.webhook_routes])
    app.state.context = context
    return app
