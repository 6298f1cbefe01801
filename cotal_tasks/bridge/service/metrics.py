"""Prometheus metrics of one bridge process, on a registry of its own (never the global
one, so several bridges in one process, as in tests, do not collide)."""

from __future__ import annotations

import contextlib
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class _Served:
    """The served-command counter and latency histogram, tallied in plain integers.

    This runs on every request; a ``prometheus_client`` counter and histogram child take
    a lock and walk the buckets on each observation, so the tallies are kept here and
    turned into the same two metric families only when the registry is collected.
    """

    def __init__(self) -> None:
        self.codes: dict[tuple[str, str, str, str], int] = {}
        # per (endpoint, command, transport): one count per bucket (the last is +Inf), sum
        self.latency: dict[tuple[str, str, str], tuple[list[int], list[float]]] = {}

    def add(self, endpoint: str, command: str, code: str, seconds: float, transport: str) -> None:
        key = (endpoint, command, code, transport)
        self.codes[key] = self.codes.get(key, 0) + 1
        series = self.latency.get((endpoint, command, transport))
        if series is None:
            series = ([0] * (len(LATENCY_BUCKETS) + 1), [0.0])
            self.latency[(endpoint, command, transport)] = series
        # bisect_left: a value equal to a bound counts in that bound's bucket (le)
        series[0][bisect_left(LATENCY_BUCKETS, seconds)] += 1
        series[1][0] += seconds

    def collect(self) -> Iterator[Metric]:
        commands = CounterMetricFamily(
            "cotal_tasks_commands",
            "Commands served, by endpoint, command, result code (ok or the error code) and "
            "transport (wire or http).",
            labels=["endpoint", "command", "code", "transport"],
        )
        for labels, count in self.codes.items():
            commands.add_metric(list(labels), count)
        yield commands
        latency = HistogramMetricFamily(
            "cotal_tasks_command_seconds",
            "Time from receiving a request to publishing its reply, by transport.",
            labels=["endpoint", "command", "transport"],
        )
        bounds = [*(repr(float(b)) for b in LATENCY_BUCKETS), "+Inf"]
        for series, (counts, total) in self.latency.items():
            running, buckets = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                buckets.append((bound, running))
            latency.add_metric(list(series), buckets, total[0])
        yield latency


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._sources: dict[str, set[str]] = {}  # endpoint -> the sources it has a gauge of
        self._served = _Served()
        self.registry.register(self._served)
        self.sync_requests = self._counter(
            "cotal_tasks_sync_requests",
            "Requests made to hosted trackers, by endpoint and HTTP status (or 'error').",
            "endpoint",
            "status",
        )
        self.rate_limit_waits = self._counter(
            "cotal_tasks_rate_limit_wait_seconds",
            "Seconds spent waiting out tracker rate limits.",
            "endpoint",
        )
        self.degraded_items = self._counter(
            "cotal_tasks_sync_degraded_items",
            "Tracker items the sync mapped without a refused part, or skipped, by endpoint "
            "and reason (text-refused, text-cut, evidence-refused, item-unmappable, "
            "issue-unreadable, webhook-unmappable).",
            "endpoint",
            "reason",
        )
        self.reconcile_sweeps = self._counter(
            "cotal_tasks_sync_reconcile_sweeps",
            "Reconcile sweeps of hosted trackers (the open issues listed, the unlisted "
            "unfinished tasks read one by one), by endpoint.",
            "endpoint",
        )
        self.reconcile_requests = self._counter(
            "cotal_tasks_sync_reconcile_listing_requests",
            "Requests the reconcile sweeps spent listing the open issues, by endpoint.",
            "endpoint",
        )
        self.reconcile_reads = self._counter(
            "cotal_tasks_sync_reconcile_reads",
            "Unfinished tasks whose issue a reconcile sweep did not list, read one by one "
            "(each costs the reads of one issue), by endpoint.",
            "endpoint",
        )
        self.change_seq = self._gauge(
            "cotal_tasks_change_seq",
            "The last changeSeq each endpoint committed or read.",
            "endpoint",
        )
        self.http_requests = self._counter(
            "cotal_tasks_http_requests",
            "HTTP requests answered, by route template and status code.",
            "route",
            "status",
        )
        self.event_streams = self._gauge(
            "cotal_tasks_http_event_streams",
            "Open server-sent event streams (GET /v1/events).",
        )
        self.build_info = self._gauge(
            "cotal_tasks_build_info", "Always 1; the running version in its label.", "version"
        )
        self.build_info.labels(_version()).set(1)
        self.last_sync = self._gauge(
            "cotal_tasks_sync_last_success_timestamp_seconds",
            "When each mirroring endpoint last synced successfully (Unix time; absent before "
            "the first success).",
            "endpoint",
        )
        self.stale = self._gauge(
            "cotal_tasks_stale",
            "1 while an endpoint's reads carry a stale marker (its sync is failing or older "
            "than stale_after_s), else 0.",
            "endpoint",
        )
        self.leader = self._gauge(
            "cotal_tasks_sync_leader",
            "1 on the instance that is a hosted endpoint's sync leader, 0 on a follower; "
            "summed over the instances, exactly 1 per endpoint.",
            "endpoint",
        )
        self.ready = self._gauge(
            "cotal_tasks_ready",
            "1 while an endpoint is ready (as /healthz says), else 0.",
            "endpoint",
        )
        self.source_failing = self._gauge(
            "cotal_tasks_sync_source_failing",
            "1 while one source of an endpoint over several (a repository, a project, a "
            "team, or the discovery of an organization's repositories) fails to sync, 2 "
            "while the tracker refuses it for good (401, 403, 404), else 0.",
            "endpoint",
            "source",
        )
        self.source_last_sync = self._gauge(
            "cotal_tasks_sync_source_last_success_timestamp_seconds",
            "When that source last synced successfully (Unix time; absent before).",
            "endpoint",
            "source",
        )
        self.rate_remaining = self._gauge(
            "cotal_tasks_tracker_rate_limit_remaining",
            "The rate-limit budget a hosted tracker's latest answer said is left, by endpoint "
            "and the pool the tracker names (GitHub's core, graphql; empty when unnamed); "
            "absent until the tracker reports one.",
            "endpoint",
            "resource",
        )
        self.rate_limit = self._gauge(
            "cotal_tasks_tracker_rate_limit_limit",
            "The whole rate-limit budget of that pool, as the tracker last reported it.",
            "endpoint",
            "resource",
        )
        self.rate_reset = self._gauge(
            "cotal_tasks_tracker_rate_limit_reset_timestamp_seconds",
            "When the tracker said that pool's budget refills (Unix time).",
            "endpoint",
            "resource",
        )

        # per credential (its fingerprint), whichever endpoints share it
        self.credential_remaining = self._gauge(
            "cotal_tasks_credential_rate_limit_remaining",
            "The rate-limit budget left to a tracker credential, shared by every endpoint "
            "using it, as the latest answer to any of them said, by provider, credential "
            "fingerprint and pool (empty when unnamed).",
            "provider",
            "credential",
            "resource",
        )
        self.credential_limit = self._gauge(
            "cotal_tasks_credential_rate_limit_limit",
            "The whole rate-limit budget of that credential's pool, as last reported.",
            "provider",
            "credential",
            "resource",
        )
        self.credential_reset = self._gauge(
            "cotal_tasks_credential_rate_limit_reset_timestamp_seconds",
            "When the tracker said that credential's pool refills (Unix time).",
            "provider",
            "credential",
            "resource",
        )
        self.credential_waits = self._counter(
            "cotal_tasks_credential_rate_limit_waits",
            "Requests held before they were sent for the budget of the credential they "
            "share, by provider, credential fingerprint and cause: the pool at its reserve "
            "(background work) or spent, retry-after (a rate-limit answer to any user) or "
            "spacing (between mutations).",
            "provider",
            "credential",
            "cause",
        )
        self.credential_wait_seconds = self._counter(
            "cotal_tasks_credential_rate_limit_wait_seconds",
            "Seconds those requests were held, by the same labels.",
            "provider",
            "credential",
            "cause",
        )

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def _gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def command_served(
        self, endpoint: str, command: str, code: str, seconds: float, transport: str = "wire"
    ) -> None:
        self._served.add(endpoint, command, code, seconds, transport)

    def tracker_request(self, endpoint: str, status: str) -> None:
        self.sync_requests.labels(endpoint, status).inc()

    def rate_limit_wait(self, endpoint: str, seconds: float) -> None:
        self.rate_limit_waits.labels(endpoint).inc(seconds)

    def credential_wait(self, tracker: str, credential: str, cause: str, seconds: float) -> None:
        self.credential_waits.labels(tracker, credential, cause).inc()
        self.credential_wait_seconds.labels(tracker, credential, cause).inc(seconds)

    def reconciled(self, endpoint: str, requests: int, reads: int) -> None:
        self.reconcile_sweeps.labels(endpoint).inc()
        self.reconcile_requests.labels(endpoint).inc(requests)
        self.reconcile_reads.labels(endpoint).inc(reads)

    def degraded(self, endpoint: str, reason: str) -> None:
        self.degraded_items.labels(endpoint, reason).inc()

    def changed(self, endpoint: str, change_seq: int) -> None:
        self.change_seq.labels(endpoint).set(change_seq)

    def endpoint_state(
        self,
        endpoint: str,
        *,
        ready: bool,
        stale: bool,
        last_success_ms: int | None,
        leader: bool | None,
    ) -> None:
        """What a probe of the endpoint found (``/healthz`` and each scrape of ``/metrics``)."""
        self.ready.labels(endpoint).set(1 if ready else 0)
        self.stale.labels(endpoint).set(1 if stale else 0)
        if last_success_ms is not None:
            self.last_sync.labels(endpoint).set(last_success_ms / 1000)
        if leader is not None:
            self.leader.labels(endpoint).set(1 if leader else 0)

    def source_state(
        self,
        endpoint: str,
        source: str,
        *,
        failing: bool,
        refused: bool,
        last_success_ms: int | None,
    ) -> None:
        """One source's state, from a probe of an endpoint over several sources."""
        self._sources.setdefault(endpoint, set()).add(source)
        self.source_failing.labels(endpoint, source).set(2 if refused else 1 if failing else 0)
        if last_success_ms is not None:
            self.source_last_sync.labels(endpoint, source).set(last_success_ms / 1000)

    def sources_now(self, endpoint: str, sources: set[str]) -> None:
        """Drop the gauges of the endpoint's sources that are not ``sources`` any more (a
        repository that left an organization endpoint)."""
        for gone in self._sources.get(endpoint, set()) - sources:
            for gauge in (self.source_failing, self.source_last_sync):
                with contextlib.suppress(KeyError):
                    gauge.remove(endpoint, gone)
        self._sources[endpoint] = set(sources)

    def rate_budget(
        self,
        endpoint: str,
        resource: str,
        remaining: int,
        limit: int | None,
        reset_ms: int | None,
    ) -> None:
        """A pool's rate-limit budget, as the tracker last reported it (a part it did not
        report keeps its gauge absent, or at the last value it saw)."""
        self.rate_remaining.labels(endpoint, resource).set(remaining)
        if limit is not None:
            self.rate_limit.labels(endpoint, resource).set(limit)
        if reset_ms is not None:
            self.rate_reset.labels(endpoint, resource).set(reset_ms / 1000)

    def credential_budget(
        self,
        provider: str,
        credential: str,
        resource: str,
        remaining: int,
        limit: int | None,
        reset_ms: int | None,
    ) -> None:
        """A pool's budget of a credential several endpoints may share (``rate_budget``)."""
        labels = (provider, credential, resource)
        self.credential_remaining.labels(*labels).set(remaining)
        if limit is not None:
            self.credential_limit.labels(*labels).set(limit)
        if reset_ms is not None:
            self.credential_reset.labels(*labels).set(reset_ms / 1000)

    def http_answered(self, route: str, status: int) -> None:
        self.http_requests.labels(route, str(status)).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition format."""
        return generate_latest(self.registry)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cotal-tasks")
    except PackageNotFoundError:
        return "unknown"
