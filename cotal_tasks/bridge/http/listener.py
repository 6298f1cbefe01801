"""The listener's bounds (``[http.limits]``): what one peer, or many, may hold of it.

uvicorn closes a keep-alive connection idle between requests (``idle_timeout_s``, its
``timeout_keep_alive``) and h11 bounds a request head's size (16 KiB), but nothing of
uvicorn bounds the time a head takes to arrive, nor the connections open at once: a
client sending a byte every few seconds holds its connection, and a few hundred of them
exhaust the process's files (the board then cannot open its database). So:

- ``BoundedH11`` is uvicorn's h11 protocol with a head deadline (``header_timeout_s``,
  from the connection's start or the previous response's end: a head not whole by then
  closes the connection) and a connection cap (``max_connections``, lowered to half the
  process's open-file limit when that is smaller): a connection past it is answered 503
  with ``Retry-After`` and closed at once, before anything of it is read.
- ``Shed`` caps the requests answered at once (``max_requests``; the event streams have
  their own caps, ``events``): past it, 503 with ``Retry-After``, in the usual error shape.

Shedding is logged at most once a minute, with the count, never per request.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.responses import error_answer
from cotal_tasks.core import ContractError, ErrorCode

log = logging.getLogger(__name__)

EVENTS_PATH = "/v1/events"  # streams: capped by count, not as requests in flight
LOG_EVERY_S = 60.0


class ShedLog:
    """Counts what was shed, and says so at most once every ``LOG_EVERY_S``."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._said = 0.0

    def shed(self, what: str, remedy: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        now = time.monotonic()
        if now - self._said >= LOG_EVERY_S:
            self._said = now
            log.warning(
                "HTTP: shedding load (503 with Retry-After): %s so far; %s",
                ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items())),
                remedy,
            )


def connection_cap(limits: HttpLimits) -> int:
    """``max_connections``, or half the open-file limit when that is lower: the rest stays
    for the databases, the broker and the trackers."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or limits.max_connections <= soft // 2:
        return limits.max_connections
    capped = max(1, soft // 2)
    log.warning(
        "HTTP: [http.limits] max_connections = %d is more than half the open-file limit "
        "(%d); taking %d. Raise the limit (ulimit -n) to allow more",
        limits.max_connections,
        soft,
        capped,
    )
    return capped


def _refusal(retry_after_s: int) -> bytes:
    body = (
        b'{"error":{"code":"unavailable","message":"the bridge has as many connections open '
        b'as it takes. Retry after the Retry-After seconds"}}'
    )
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"retry-after: %d\r\ncache-control: no-store\r\nx-content-type-options: nosniff\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (retry_after_s, len(body), body)
    )


def bounded_protocol(limits: HttpLimits, shed: ShedLog) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the head deadline and the connection cap."""
    cap = connection_cap(limits)
    refusal = _refusal(limits.retry_after_s)

    class BoundedH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap:
                shed.shed("connections", "raise [http.limits] max_connections if it is real")
                transport.write(refusal)
                transport.close()
                return
            self._arm_head()

        def _arm_head(self) -> None:
            self._disarm_head()
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_late)

        def _disarm_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                shed.shed("slow request heads", "a client sends its head too slowly")
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm_head()  # the head is in: the request runs

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._arm_head()  # the next head, whole, within the deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head()
            super().connection_lost(exc)

    return BoundedH11


class Shed:
    """ASGI middleware: at most ``max_requests`` requests answered at once (event streams
    aside); past it, 503 with ``Retry-After``."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, shed: ShedLog | None = None) -> None:
        self.app = app
        self.limits = limits
        self.log = shed or ShedLog()
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") == EVENTS_PATH:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limits.max_requests:
            self.log.shed("requests", "raise [http.limits] max_requests if the load is real")
            answer = error_answer(
                ContractError(
                    ErrorCode.UNAVAILABLE,
                    f"the bridge is answering {self.limits.max_requests} requests already "
                    "([http.limits] max_requests). Retry after the Retry-After seconds",
                )
            )
            answer.headers["Retry-After"] = str(self.limits.retry_after_s)
            await answer(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def uvicorn_options(limits: HttpLimits) -> dict[str, Any]:
    """What uvicorn itself bounds: the keep-alive idle time. Its own concurrency limit
    stays off: it answers 503 without ``Retry-After`` and logs every refusal."""
    return {"timeout_keep_alive": limits.idle_timeout_s, "limit_concurrency": None}
