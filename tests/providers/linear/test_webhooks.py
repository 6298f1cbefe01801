"""``POST /webhooks/linear`` on a real running bridge (embedded nats-server, the HTTP
listener on a free port, the sync loop polling the fake Linear): a delivery signed with
the webhook's secret (``Linear-Signature``, HMAC-SHA256 of the raw body) wakes the issue
it names and only that one; a bad signature, or a ``webhookTimestamp`` out of the replay
window, is 401 and changes nothing; a redelivery (the same ``Linear-Delivery``) is
acknowledged without a second refresh; an issue of a team no endpoint syncs is 404."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cotal_tasks.bridge.wiring.process import Bridge
from tests.bridge._support import Client
from tests.providers.hosted_support import hooked_bridge
from tests.providers.linear._support import SECRET_ENV, WEBHOOK_SECRET, endpoint_config
from tests.support.fake_linear import FakeLinear, linear_webhook
from tests.support.fake_linear_state import Issue
from tests.support.polling import eventually


@dataclass
class Running:
    fake: FakeLinear
    bridge: Bridge
    http: httpx.AsyncClient

    @property
    def client(self) -> Client:
        endpoint = self.bridge.endpoints[0]
        return Client(endpoint.service, endpoint.store)

    async def deliver(self, issue: Issue, **how: Any) -> httpx.Response:
        secret = how.pop("secret", WEBHOOK_SECRET)
        headers, body = linear_webhook(self.fake, secret, issue, **how)
        return await self.http.post("/webhooks/linear", content=body, headers=headers)

    def reads_since(self, mark: int) -> list[str]:
        return [r.path for r in self.fake.requests[mark:]]


@pytest.fixture
async def running(
    linear: FakeLinear, linear_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    linear.add_team("OPS")
    for k in range(3):
        linear.new_issue(f"issue {k + 1}")
        linear.advance(60)
    endpoint = endpoint_config(linear_url, webhook_secret_env=SECRET_ENV)
    async with hooked_bridge(endpoint, tmp_path / "bridge") as (bridge, http):
        yield Running(linear, bridge, http)


async def test_a_signed_issue_update_wakes_that_issue_alone(running: Running) -> None:
    fake = running.fake
    issue = fake.issue("ENG-2")
    fake.move(issue, "Done")
    mark = len(fake.requests)
    reply = await running.deliver(issue)
    assert reply.status_code == 202, reply.text

    async def refreshed() -> bool:
        return bool((await running.client.get("ENG-2"))["status"] == "done")

    await eventually(refreshed)
    assert running.reads_since(mark) == ["/graphql/Issue"]  # that issue, nothing else
    (asked,) = [r.body["variables"] for r in fake.requests[mark:]]
    assert asked["id"] == "ENG-2"


async def test_a_comment_names_its_issue(running: Running) -> None:
    reply = await running.deliver(running.fake.issue("ENG-1"), kind="Comment", action="create")
    assert (reply.status_code, reply.json()["message"]) == (202, "accepted; 1 issue(s) to refresh")


async def test_a_bad_signature_or_a_stale_timestamp_is_refused_and_changes_nothing(
    running: Running,
) -> None:
    fake = running.fake
    issue = fake.issue("ENG-1")
    mark = len(fake.requests)
    forged = await running.deliver(issue, secret="not the secret at all, no")
    replayed = await running.deliver(issue, at_ms=round(time.time() * 1000) - 5 * 60_000)
    assert (forged.status_code, replayed.status_code) == (401, 401)
    assert "webhookTimestamp" in replayed.json()["message"]
    assert running.reads_since(mark) == []


async def test_a_redelivery_is_acknowledged_once(running: Running) -> None:
    issue = running.fake.issue("ENG-3")
    first = await running.deliver(issue, delivery="6f1e3f1c-0f47-4bbf-9a41-2f8a4a0b9c11")
    again = await running.deliver(issue, delivery="6f1e3f1c-0f47-4bbf-9a41-2f8a4a0b9c11")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["message"] == "delivery already received"


async def test_an_issue_of_a_team_no_endpoint_syncs_is_404(running: Running) -> None:
    other = running.fake.new_issue("elsewhere", team="OPS")
    reply = await running.deliver(other)
    assert reply.status_code == 404
    assert "team" in reply.json()["message"]


async def test_a_renamed_label_asks_the_next_poll_to_read_every_issue(running: Running) -> None:
    payload = {
        "action": "update",
        "type": "IssueLabel",
        "data": {"id": "0b6c3d1e-label", "name": "Blocked now"},
        "updatedFrom": {"name": "Blocked"},
        "webhookTimestamp": round(time.time() * 1000),
    }
    body = json.dumps(payload).encode()
    headers = {
        "linear-signature": hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "linear-delivery": "1b2c3d4e-5f60-4718-92a3-b4c5d6e7f809",
        "linear-event": "IssueLabel",
        "content-type": "application/json",
    }
    reply = await running.http.post("/webhooks/linear", content=body, headers=headers)
    assert reply.status_code == 202, reply.text
    assert "reads every issue again" in reply.json()["message"]


async def test_a_delivery_goes_to_the_team_the_issue_is_in_now(
    linear: FakeLinear, linear_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over ENG and OPS, an issue moved from ENG to OPS is woken in OPS's sync, as the
    task it was (ENG-1: Linear answers for its old identifier)."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    linear.add_team("OPS")
    issue = linear.new_issue("wandering")
    endpoint = endpoint_config(linear_url, webhook_secret_env=SECRET_ENV, teams=["ENG", "OPS"])
    async with hooked_bridge(endpoint, tmp_path / "bridge") as (bridge, http):
        running = Running(linear, bridge, http)
        linear.to_team(issue, "OPS")
        linear.move(issue, "Done")
        mark = len(linear.requests)
        reply = await running.deliver(issue)
        assert reply.status_code == 202, reply.text

        async def refreshed() -> bool:
            return bool((await running.client.get("ENG-1"))["status"] == "done")

        await eventually(refreshed)
        (asked,) = [r.body["variables"] for r in linear.requests[mark:]]
        assert asked["id"] == "ENG-1"
        page = await running.client.list_tasks()
        assert [t["taskId"] for t in page["tasks"]] == ["ENG-1"]  # no second task
