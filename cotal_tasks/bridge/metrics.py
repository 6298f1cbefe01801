"""Prometheus metrics of one bridge process, on a registry of its own (never the global
one, so several bridges in one process, as in tests, do not collide)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._served: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
        self.commands = Counter(
            "cotal_tasks_commands",
            "Commands served, by endpoint, command, result code (ok or the error code) and "
            "transport (wire or http).",
            ["endpoint", "command", "code", "transport"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "cotal_tasks_command_seconds",
            "Time from receiving a request to publishing its reply, by transport.",
            ["endpoint", "command", "transport"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.sync_requests = Counter(
            "cotal_tasks_sync_requests",
            "Requests made to hosted trackers, by endpoint and HTTP status (or 'error').",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.rate_limit_waits = Counter(
            "cotal_tasks_rate_limit_wait_seconds",
            "Seconds spent waiting out tracker rate limits.",
            ["endpoint"],
            registry=self.registry,
        )
        self.degraded_items = Counter(
            "cotal_tasks_sync_degraded_items",
            "Tracker items the sync mapped without a refused part, or skipped, by endpoint "
            "and reason (text-refused, text-cut, evidence-refused, item-unmappable, "
            "issue-unreadable, webhook-unmappable).",
            ["endpoint", "reason"],
            registry=self.registry,
        )
        self.change_seq = Gauge(
            "cotal_tasks_change_seq",
            "The last changeSeq each endpoint committed or read.",
            ["endpoint"],
            registry=self.registry,
        )
        self.http_requests = Counter(
            "cotal_tasks_http_requests",
            "HTTP requests answered, by route template and status code.",
            ["route", "status"],
            registry=self.registry,
        )
        self.event_streams = Gauge(
            "cotal_tasks_http_event_streams",
            "Open server-sent event streams (GET /v1/events).",
            registry=self.registry,
        )

    def command_served(
        self, endpoint: str, command: str, code: str, seconds: float, transport: str = "wire"
    ) -> None:
        key = (endpoint, command, code, transport)
        children = self._served.get(key)
        if children is None:  # label lookups are not free; this runs on every request
            children = (
                self.commands.labels(endpoint, command, code, transport),
                self.latency.labels(endpoint, command, transport),
            )
            self._served[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def tracker_request(self, endpoint: str, status: str) -> None:
        self.sync_requests.labels(endpoint, status).inc()

    def rate_limit_wait(self, endpoint: str, seconds: float) -> None:
        self.rate_limit_waits.labels(endpoint).inc(seconds)

    def degraded(self, endpoint: str, reason: str) -> None:
        self.degraded_items.labels(endpoint, reason).inc()

    def changed(self, endpoint: str, change_seq: int) -> None:
        self.change_seq.labels(endpoint).set(change_seq)

    def http_answered(self, route: str, status: int) -> None:
        self.http_requests.labels(route, str(status)).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition format."""
        return generate_latest(self.registry)
