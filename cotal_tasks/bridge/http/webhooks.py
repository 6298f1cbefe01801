"""Webhook routes: ``POST /webhooks/<route>``, one for each provider that takes deliveries.

The route hands the delivery (its headers and raw body) to the provider's receiver, given
the receivers of that provider's endpoints: the provider verifies it, finds the endpoint
it is for and tells that endpoint's receiver (``WebhookReceiver``: remember the delivery,
wake the sync). Nothing here knows a tracker.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from cotal_tasks.providers.provider import Webhook, WebhookReceiver
from cotal_tasks.providers.registry import PROVIDERS


def _route(webhook: Webhook, receivers: Sequence[WebhookReceiver]) -> Route:
    receive = webhook.receiver(receivers)

    async def deliver(request: Request) -> JSONResponse:
        reply = await receive(request.headers, await request.body())
        return JSONResponse({"message": reply.message}, status_code=reply.status)

    return Route(f"/webhooks/{webhook.route}", deliver, methods=["POST"])


def webhook_routes(receivers: Sequence[tuple[str, WebhookReceiver]]) -> list[BaseRoute]:
    """A route per provider with a webhook, over the receivers of its endpoints, given as
    (provider name, receiver); a provider with none answers every delivery 404, naming the
    remedy."""
    routes: list[BaseRoute] = []
    for entry in PROVIDERS:
        if entry.webhook is not None:
            own = [receiver for name, receiver in receivers if name == entry.name]
            routes.append(_route(entry.webhook, own))
    return routes
