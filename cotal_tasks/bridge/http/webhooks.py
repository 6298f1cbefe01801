"""Webhook routes: ``POST /webhooks/<route>``, one for each provider that takes deliveries.

The route reads the delivery's body within its bounds (``[http.limits]``
``webhook_max_body_bytes``, checked against ``Content-Length`` before anything is read and
against what arrives as it arrives, so no more than that is ever held: 413; and
``body_timeout_s`` for the whole body: 408), then hands the delivery (its headers and raw
body) to the provider's receiver, given the receivers of that provider's endpoints: the
provider verifies the raw bytes, finds the endpoint it is for and tells that endpoint's
receiver (``WebhookReceiver``: remember the delivery, wake the sync). A delivery no
secret verifies (401) is recorded in the route's ``RefusedDeliveries`` (a rate-limited log
line, ``/healthz``, the dashboard). Nothing here knows a tracker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.refusals import RefusedDeliveries
from cotal_tasks.providers.provider import Webhook, WebhookReceiver, WebhookReply
from cotal_tasks.providers.registry import PROVIDERS

log = logging.getLogger(__name__)


class _Refused(Exception):
    def __init__(self, reply: WebhookReply) -> None:
        self.reply = reply


async def read_bounded(request: Request, limits: HttpLimits) -> bytes:
    """The body, never holding more than ``webhook_max_body_bytes``; ``_Refused`` else."""
    most = limits.webhook_max_body_bytes
    too_big = WebhookReply(
        413,
        f"the body is larger than this bridge takes ({most} bytes, [http.limits] "
        "webhook_max_body_bytes). Send only the tracker's own deliveries (GitHub's are at "
        "most 25 MiB), or raise the limit",
    )
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > most):
        raise _Refused(too_big if declared.isdigit() else WebhookReply(400, "bad Content-Length"))
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in request.stream():
                if len(body) + len(chunk) > most:
                    raise _Refused(too_big)
                body += chunk
    except TimeoutError:
        raise _Refused(
            WebhookReply(
                408,
                f"the body did not arrive within {limits.body_timeout_s:g} s ([http.limits] "
                "body_timeout_s). Send it whole, at once",
            )
        ) from None
    return bytes(body)


def _route(
    webhook: Webhook,
    receivers: Sequence[WebhookReceiver],
    limits: HttpLimits,
    refusals: RefusedDeliveries,
) -> Route:
    receive = webhook.receiver(receivers)

    async def deliver(request: Request) -> JSONResponse:
        try:
            body = await read_bounded(request, limits)
            reply = await receive(request.headers, body)
        except _Refused as refused:
            reply = refused.reply
        except ClientDisconnect:
            reply = WebhookReply(400, "the sender went away before the body arrived")
        except (ValueError, RecursionError) as exc:  # a decode failure past the receiver's
            log.warning("%s webhook: a delivery did not decode (%s)", webhook.route, type(exc))
            reply = WebhookReply(400, "the body could not be decoded. Send the tracker's JSON")
        if reply.status == 401:
            refusals.refused(request.client.host if request.client else None, reply.message)
        headers = {"Connection": "close"} if reply.status in (408, 413) else None
        return JSONResponse({"message": reply.message}, status_code=reply.status, headers=headers)

    return Route(f"/webhooks/{webhook.route}", deliver, methods=["POST"])


class LiveReceivers(Sequence[WebhookReceiver]):
    """The receivers of a provider's endpoints, read as they are at each delivery (an
    endpoint whose sources are discovered adds and removes its own while it runs)."""

    def __init__(self, lists: Sequence[Sequence[WebhookReceiver]]) -> None:
        self.lists = lists

    def _now(self) -> list[WebhookReceiver]:
        return [receiver for each in self.lists for receiver in each]

    @overload
    def __getitem__(self, index: int) -> WebhookReceiver: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[WebhookReceiver]: ...

    def __getitem__(self, index: int | slice) -> WebhookReceiver | Sequence[WebhookReceiver]:
        return self._now()[index]

    def __len__(self) -> int:
        return sum(len(each) for each in self.lists)

    def __iter__(self) -> Iterator[WebhookReceiver]:
        return iter(self._now())


def webhook_routes(
    receivers: Sequence[tuple[str, WebhookReceiver | Sequence[WebhookReceiver]]],
    limits: HttpLimits | None = None,
    refusals: Mapping[str, RefusedDeliveries] | None = None,
) -> list[BaseRoute]:
    """A route per provider with a webhook, over the receivers of its endpoints, given as
    (provider name, an endpoint's receivers, read live, or one receiver); a provider with
    none answers every delivery 404, naming the remedy. ``limits``: the listener's bounds
    (the defaults when ``None``); ``refusals``: where each provider's route records the
    deliveries it refuses (``refused_records``)."""
    bounds = limits or HttpLimits()
    records = refusals if refusals is not None else refused_records()
    routes: list[BaseRoute] = []
    for entry in PROVIDERS:
        if entry.webhook is not None:
            own = LiveReceivers(
                [
                    each if isinstance(each, Sequence) else (each,)
                    for name, each in receivers
                    if name == entry.name
                ]
            )
            routes.append(_route(entry.webhook, own, bounds, records[entry.name]))
    return routes


def refused_records() -> dict[str, RefusedDeliveries]:
    """A ``RefusedDeliveries`` for each provider with a webhook route, by provider name."""
    return {
        entry.name: RefusedDeliveries(entry.webhook.route)
        for entry in PROVIDERS
        if entry.webhook is not None
    }
