"""Requests answered at once, by kind, each kind within its own budget (``[http.limits]``).

The read API and everything else a browser or a stranger may ask (``max_requests``), the
probes (``/healthz`` and ``/metrics``, ``max_probe_requests``) and the webhook deliveries
(``/webhooks/…``, ``max_webhook_requests``) never share a budget: a flood of reads does
not take the orchestrator's probe or the tracker's deliveries down with it, nor the other
way round. The event streams are capped by count (``max_streams``, in ``events``), not
here. Past a budget: 503 with ``Retry-After``, in the usual error shape.

Webhook deliveries are also paced per address (``webhook_rate_per_peer``, ``Pace``): a
peer may send a second's worth at once, then each delivery waits its turn before it is
read, at most ``PACE_WAIT_S`` (past that: 429 with ``Retry-After``). A tracker's bursts
pass (slowed at most a few seconds, well within their delivery timeouts; the poll stays
the source of truth), while a flood from one address, a replayed delivery above all, is
held at its source: its senders wait on their answers instead of taking the event loop
from the wire. A waiting delivery holds no slot of ``max_webhook_requests``.

Shedding is logged at most once a minute, with the counts, never per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.responses import error_answer
from cotal_tasks.core import ContractError, ErrorCode

log = logging.getLogger(__name__)

EVENTS_PATH = "/v1/events"  # streams: capped by count, not as requests in flight
PROBE_PATHS = frozenset({"/healthz", "/metrics"})
WEBHOOK_PREFIX = "/webhooks/"
LOG_EVERY_S = 60.0
PACE_WAIT_S = 5.0  # the longest a paced delivery waits (trackers time out after 10 s)
PACED_PEERS = 4096  # addresses paced at once; the least recent is forgotten past it


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
                "HTTP: shedding load (503 with Retry-After, or the connection closed): %s so "
                "far; %s",
                ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items())),
                remedy,
            )


@dataclass
class Budget:
    """One kind of request: how many may be answered at once, and how many are."""

    kind: str  # as the log counts it
    key: str  # its [http.limits] key
    most: int
    what: str  # what the refusal says is being answered
    in_flight: int = 0


@dataclass
class Pace:
    """Each address's webhook deliveries at ``rate`` a second: a token bucket holding a
    second's worth, whose debt is the deliveries waiting their turn."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    _peers: OrderedDict[str, tuple[float, float]] = field(default_factory=OrderedDict)

    def wait_s(self, peer: str) -> float | None:
        """How long this delivery of ``peer`` waits for its turn (0: none), its turn
        taken; ``None``: longer than ``PACE_WAIT_S``, nothing taken."""
        now = self.clock()
        tokens, at = self._peers.pop(peer, (self.rate, now))
        tokens = min(self.rate, tokens + max(0.0, now - at) * self.rate) - 1
        wait = max(0.0, -tokens / self.rate)
        if wait > PACE_WAIT_S:
            tokens += 1  # refused: its turn is not taken
        self._peers[peer] = (tokens, now)
        if len(self._peers) > PACED_PEERS:
            self._peers.popitem(last=False)
        return None if wait > PACE_WAIT_S else wait


class Shed:
    """ASGI middleware: each kind of request within its budget; past it, 503 with
    ``Retry-After``."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, shed: ShedLog | None = None) -> None:
        self.app = app
        self.limits = limits
        self.log = shed or ShedLog()
        self.reads = Budget("requests", "max_requests", limits.max_requests, "requests")
        self.probes = Budget(
            "probes", "max_probe_requests", limits.max_probe_requests, "health and metrics probes"
        )
        self.webhooks = Budget(
            "webhooks", "max_webhook_requests", limits.max_webhook_requests, "webhook deliveries"
        )
        rate = limits.webhook_rate_per_peer
        self.pace = Pace(rate) if rate > 0 else None

    def budget(self, path: str) -> Budget:
        if path in PROBE_PATHS:
            return self.probes
        if path.startswith(WEBHOOK_PREFIX):
            return self.webhooks
        return self.reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path == EVENTS_PATH:
            await self.app(scope, receive, send)
            return
        budget = self.budget(path)
        paced = budget is self.webhooks and self.pace is not None
        if paced and not await self._paced(scope, receive, send):
            return
        if budget.in_flight >= budget.most:
            self.log.shed(budget.kind, f"raise [http.limits] {budget.key} if the load is real")
            answer = error_answer(
                ContractError(
                    ErrorCode.UNAVAILABLE,
                    f"the bridge is answering {budget.most} {budget.what} already "
                    f"([http.limits] {budget.key}). Retry after the Retry-After seconds",
                )
            )
            answer.headers["Retry-After"] = str(self.limits.retry_after_s)
            await answer(scope, receive, send)
            return
        budget.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            budget.in_flight -= 1

    async def _paced(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Wait for the delivery's turn among its address's (``Pace``); ``False`` when it
        was answered 429 instead."""
        assert self.pace is not None
        client = scope.get("client")
        wait = self.pace.wait_s(str(client[0]) if client else "")
        if wait is None:
            rate = self.limits.webhook_rate_per_peer
            self.log.shed(
                "paced webhooks", "raise [http.limits] webhook_rate_per_peer if the load is real"
            )
            answer = error_answer(
                ContractError(
                    ErrorCode.RESOURCE_EXHAUSTED,
                    f"this address sends more than {rate:g} webhook deliveries a second "
                    "([http.limits] webhook_rate_per_peer). Retry after the Retry-After "
                    "seconds",
                )
            )
            answer.headers["Retry-After"] = str(self.limits.retry_after_s)
            await answer(scope, receive, send)
            return False
        if wait > 0:
            await asyncio.sleep(wait)
        return True
