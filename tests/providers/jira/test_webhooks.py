"""``POST /webhooks/jira`` on a real running bridge (embedded nats-server, the HTTP
listener on a free port, the sync loop polling the fake Jira): a delivery signed with
the webhook's secret (``X-Hub-Signature``) wakes the issue it names, matched by the
project's stable id; a bad signature is 401 and changes nothing; a redelivery (the same
``X-Atlassian-Webhook-Identifier``) is acknowledged without a second refresh."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cotal_tasks.bridge.wiring.process import Bridge
from tests.bridge._support import Client
from tests.providers.hosted_support import add_issues, hooked_bridge
from tests.providers.jira._support import (
    SEARCH,
    SECRET_ENV,
    WEBHOOK_SECRET,
    endpoint_config,
    task_id,
)
from tests.support.fake_jira import FakeJira, jira_webhook, webhook_payload
from tests.support.fake_jira_state import PROJECT, Comment
from tests.support.polling import eventually

Json = dict[str, Any]


@dataclass
class Running:
    fake: FakeJira
    bridge: Bridge
    http: httpx.AsyncClient

    @property
    def client(self) -> Client:
        endpoint = self.bridge.endpoints[0]
        return Client(endpoint.service, endpoint.store)

    async def record(self, n: int) -> Json:
        return await self.client.get(task_id(n))

    async def deliver(
        self, event: str, n: int, secret: str | None = WEBHOOK_SECRET, delivery: str | None = None
    ) -> httpx.Response:
        payload = webhook_payload(self.fake, event, self.fake.issue(n))
        headers, body = jira_webhook(payload, secret, delivery)
        return await self.http.post("/webhooks/jira", content=body, headers=headers)

    def reads_since(self, mark: int) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.fake.requests[mark:]]


@pytest.fixture
async def running(
    jira: FakeJira, jira_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    add_issues(jira, PROJECT, 3, spacing_s=60)
    endpoint = endpoint_config(jira_url, webhook_secret_env=SECRET_ENV)
    async with hooked_bridge(endpoint, tmp_path / "bridge") as (bridge, http):
        yield Running(jira, bridge, http)


async def test_a_signed_issue_update_wakes_that_issue_alone(running: Running) -> None:
    fake = running.fake
    fake.advance(60)
    fake.set_status(fake.issue(2), "Done", "Done")
    mark = len(fake.requests)
    reply = await running.deliver("jira:issue_updated", 2)
    assert reply.status_code == 202

    async def refreshed() -> bool:
        return bool((await running.record(2))["status"] == "done")

    assert await eventually(refreshed) < 5
    reads = running.reads_since(mark)
    assert "GET /rest/api/3/issue/DEMO-2" in reads
    assert f"POST {SEARCH}" not in reads  # a refresh of the named issue, not a poll


async def test_comment_and_delete_events_wake_their_issue(running: Running) -> None:
    fake = running.fake
    issue = fake.issue(1)
    issue.comments.append(Comment("9", {"type": "doc", "content": []}, "557058:x", fake.clock.ms))
    assert (await running.deliver("comment_created", 1)).status_code == 202
    payload = webhook_payload(fake, "jira:issue_deleted", fake.issue(3))
    fake.delete_issue(3)
    headers, body = jira_webhook(payload, WEBHOOK_SECRET)
    assert (
        await running.http.post("/webhooks/jira", content=body, headers=headers)
    ).status_code == 202

    async def dropped() -> bool:
        return bool((await running.record(3))["statusSource"] == "deleted")

    await eventually(dropped)


async def test_a_bad_signature_is_refused_and_changes_nothing(running: Running) -> None:
    fake = running.fake
    before = await running.record(2)
    mark = len(fake.requests)
    reply = await running.deliver("jira:issue_updated", 2, secret="not the secret")
    assert reply.status_code == 401
    assert "X-Hub-Signature does not match" in reply.json()["message"]
    unsigned = await running.deliver("jira:issue_updated", 2, secret=None)
    assert unsigned.status_code == 401
    assert running.reads_since(mark) == []
    assert await running.record(2) == before


async def test_a_redelivery_is_acknowledged_once(running: Running) -> None:
    first = await running.deliver("jira:issue_updated", 1, delivery="d-1")
    again = await running.deliver("jira:issue_updated", 1, delivery="d-1")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["message"] == "delivery already received"


async def test_another_project_is_not_this_endpoints(running: Running) -> None:
    payload = webhook_payload(running.fake, "jira:issue_updated", running.fake.issue(1))
    payload["issue"]["fields"]["project"] = {"id": "10777", "key": "OTHER"}
    payload["issue"]["key"] = "OTHER-1"
    headers, body = jira_webhook(payload, WEBHOOK_SECRET)
    reply = await running.http.post("/webhooks/jira", content=body, headers=headers)
    assert reply.status_code == 404


async def test_a_renamed_project_key_still_matches_by_its_id(running: Running) -> None:
    payload = webhook_payload(running.fake, "jira:issue_updated", running.fake.issue(1))
    payload["issue"]["fields"]["project"]["key"] = "RENAMED"  # the stable id is kept
    headers, body = jira_webhook(payload, WEBHOOK_SECRET)
    reply = await running.http.post("/webhooks/jira", content=body, headers=headers)
    assert reply.status_code == 202
