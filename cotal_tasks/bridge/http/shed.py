"""Requests answered at once, by kind, each kind within its own budget (``[http.limits]``).

The read API and everything else a browser or a stranger may ask (``max_requests``), the
probes (``/healthz`` and ``/metrics``, ``max_probe_requests``) and the webhook deliveries
(``/webhooks/…``, ``max_webhook_requests``) never share a budget: a flood of reads does
not take the orchestrator's probe or the tracker's deliveries down with it, nor the other
way round. The event streams are capped by count (``max_streams``, in ``events``), not
here. Past a budget: 503 with ``Retry-After``, in the usual error shape.

Shedding is logged at most once a minute, with the counts, never per request.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.bridge.http.responses import error_answer
from cotal_tasks.core import ContractError, ErrorCode

log = logging.getLogger(__name__)

EVENTS_PATH = "/v1/events"  # streams: capped by count, not as requests in flight
PROBE_PATHS = frozenset({"/healthz", "/metrics"})
WEBHOOK_PREFIX = "/webhooks/"
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
