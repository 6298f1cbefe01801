"""Composition of the hosted trackers: client, tracker, mirror, store and sync loop."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.process.leader import Election, process_holder
from cotal_tasks.bridge.service.commands import PresenceSource
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.github.tracker import GitHubTracker
from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.hosted.http import RetryPolicy, TrackerHttp
from cotal_tasks.providers.hosted.store import HostedStore, SeatUids, no_uids
from cotal_tasks.providers.hosted.sync import SyncEngine
from cotal_tasks.providers.hosted.tracker import Tracker
from cotal_tasks.providers.hosted.writeback import WritePlan


@dataclass
class Hosted:
    """A hosted endpoint's parts; ``close`` releases the HTTP client (the store is separate)."""

    store: HostedStore
    sync: SyncEngine
    http: TrackerHttp
    tracker_config: HostedConfig
    webhook_secret: bytes | None
    election: Election

    async def close(self) -> None:
        await self.http.client.aclose()


def secret(env: str | None, what: str, *, required: bool) -> str | None:
    if env is None:
        return None
    value = os.environ.get(env)
    if value is None and required:
        raise ContractError(
            ErrorCode.FAILED_PRECONDITION,
            f"{what} is read from the environment variable {env}, which is not set; export it "
            "(the config names the variable, never the secret)",
        )
    return value


def presence_uids(presence: PresenceSource | None) -> SeatUids:
    """A seat's current lifecycle uid from its fresh presence card, if it has one."""
    if presence is None:
        return no_uids

    async def uid_of(owner: str, actor: str) -> str | None:
        card = await presence.lookup(owner, actor)
        return card.lifecycleUid if card is not None and card.fresh else None

    return uid_of


def _http(
    cfg: HostedConfig,
    tracker: str,
    client: Callable[[str, str, float], httpx.AsyncClient],
    retry: RetryPolicy,
) -> TrackerHttp:
    token = secret(cfg.token_env, f"the {tracker} token", required=True) or ""
    return TrackerHttp(
        client(cfg.api_url, token, cfg.request_timeout_s),
        retry,
        max_retries=cfg.max_retries,
        max_wait_s=cfg.max_rate_limit_wait_s,
    )


def build_tracker(endpoint: EndpointConfig) -> tuple[Tracker, HostedConfig, TrackerHttp]:
    """The tracker client of a hosted endpoint (its HTTP client is the caller's to close)."""
    if endpoint.github is not None:
        cfg = endpoint.github
        http = _http(cfg, "GitHub", github_http_client, github_retry)
        http.allow_origin(cfg.graphql_endpoint())
        return GitHubTracker(GitHubClient(http, cfg.repository), cfg), cfg, http
    if endpoint.gitlab is not None:
        lab = endpoint.gitlab
        http = _http(lab, "GitLab", gitlab_http_client, gitlab_retry)
        client = GitLabClient(http, lab.project, lab.pagination)
        return GitLabTracker(client, lab), lab, http
    raise ContractError(
        ErrorCode.UNIMPLEMENTED,
        f"provider {endpoint.provider!r} has no tracker; use board, github or gitlab",
    )


def write_plan(endpoint: EndpointConfig) -> tuple[WritePlan, str]:
    """How writes map onto the tracker, and the name of the sync checkpoint."""
    if endpoint.github is not None:
        cfg = endpoint.github
        return WritePlan(cfg.claimed_label, cfg.blocked_label), f"github:{cfg.repository}"
    if endpoint.gitlab is not None:
        lab = endpoint.gitlab
        plan = WritePlan(
            lab.claimed_label, lab.blocked_label, lab.dropped_label, close_reasons=False
        )
        return plan, f"gitlab:{lab.project}"
    raise ContractError(ErrorCode.UNIMPLEMENTED, f"provider {endpoint.provider!r} writes nothing")


def build_hosted(
    config: BridgeConfig,
    endpoint: EndpointConfig,
    mirror: BoardStore,
    clock: Callable[[], int],
    *,
    presence: PresenceSource | None,
    metrics: Metrics | None,
) -> Hosted:
    tracker, hosted_cfg, http = build_tracker(endpoint)
    plan, key = write_plan(endpoint)
    if metrics is not None:
        name = endpoint.name
        http.on_response = lambda status: metrics.tracker_request(name, status)
        http.on_wait = lambda seconds: metrics.rate_limit_wait(name, seconds)
        tracker.boundary.observers.append(lambda reason: metrics.degraded(name, reason))
    store = HostedStore(
        mirror,
        tracker,
        config=hosted_cfg,
        plan=plan,
        space=config.space,
        clock=clock,
        seat_uids=presence_uids(presence),
    )
    webhook = secret(hosted_cfg.webhook_secret_env, "the webhook secret", required=False)
    sync = SyncEngine(store, mirror.state(), key, clock)
    if metrics is not None:
        name = endpoint.name
        sync.sweep_observers.append(
            lambda requests, reads: metrics.reconciled(name, requests, reads)
        )
    return Hosted(
        store,
        sync,
        http,
        hosted_cfg,
        webhook.encode() if webhook is not None else None,
        Election(sync, mirror.state(), hosted_cfg.poll_interval_s, clock, process_holder()),
    )
