"""A bridge syncing the fake GitHub, on a real listener: the rate-limit budget GitHub's
answers report shows in ``/healthz``'s detailed view under the endpoint's sync entry (with
the fingerprint of the token whose budget it is), and in ``/metrics``, per pool and per
token; a tokenless ``/healthz`` still says ``ready`` alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.bridge.http._support import READER_ENV, TOKENS, bearer, open_http_mesh, set_secrets
from tests.providers.github._support import ENDPOINT_NAME, REPO, github_config
from tests.support.fake_github import FakeGitHub
from tests.support.polling import eventually


async def test_the_budget_left_in_healthz_and_metrics(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_secrets(monkeypatch)
    fake.add_issue(REPO, "First")
    fake.set_rate_limit(4200, limit=5000, reset_in=1800)
    async with open_http_mesh(
        tmp_path,
        names=(ENDPOINT_NAME,),
        tokens=TOKENS,
        local_reader=False,
        settings=github_config(github_url, poll_interval_s=3600),
    ) as mesh:
        reader = bearer(READER_ENV)

        async def synced() -> bool:
            entry = (await mesh.get("/healthz", headers=reader)).json()["endpoints"]
            return "lastSync" in entry[ENDPOINT_NAME]

        await eventually(synced, 20, what="the first sync")
        body = (await mesh.get("/healthz", headers=reader)).json()
        tokenless = (await mesh.get("/healthz")).json()
        scraped = (await mesh.get("/metrics")).text
    sync = body["endpoints"][ENDPOINT_NAME]["sync"]
    assert sync["role"] == "leader"
    [budget] = sync["rateLimits"]  # before: no budget anywhere
    assert budget["resource"] == "core"
    fingerprint = budget["credential"]  # the token's, shared with its other endpoints
    assert len(fingerprint) == 12
    assert fingerprint not in fake.token
    assert (budget["remaining"], budget["limit"]) == (fake.rate_remaining, 5000)
    assert fake.rate_remaining < 4200  # the sync spent some: the latest answer's figure
    assert budget["resetAt"] == fake.rate_reset * 1000
    assert budget["readAt"] > 1.7e12
    assert tokenless["endpoints"] == {ENDPOINT_NAME: {"ready": True}}

    gauges = {
        (family.name, sample.labels["endpoint"], sample.labels["resource"]): sample.value
        for family in text_string_to_metric_families(scraped)
        if family.name.startswith("cotal_tasks_tracker_rate_limit")
        for sample in family.samples
    }
    shared = {
        family.name: sample.value
        for family in text_string_to_metric_families(scraped)
        if family.name.startswith("cotal_tasks_credential_rate_limit")
        for sample in family.samples
        if sample.labels == {"provider": "github", "credential": fingerprint, "resource": "core"}
    }
    assert shared == {
        "cotal_tasks_credential_rate_limit_remaining": fake.rate_remaining,
        "cotal_tasks_credential_rate_limit_limit": 5000,
        "cotal_tasks_credential_rate_limit_reset_timestamp_seconds": fake.rate_reset,
    }
    labels = (ENDPOINT_NAME, "core")
    assert gauges == {
        ("cotal_tasks_tracker_rate_limit_remaining", *labels): fake.rate_remaining,
        ("cotal_tasks_tracker_rate_limit_limit", *labels): 5000,
        ("cotal_tasks_tracker_rate_limit_reset_timestamp_seconds", *labels): fake.rate_reset,
    }
