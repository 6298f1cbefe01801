"""``POST /webhooks/gitlab`` on a real running bridge (embedded nats-server, the HTTP
listener on a free port, the sync loop polling the fake GitLab): the ``X-Gitlab-Token``
accepted (202, the named issue refreshed at once) and refused (401, nothing changes), and
a delivery seen before acknowledged (200) without a second refresh.

The poll interval is a minute, so an issue refreshed within seconds was refreshed by the
webhook's wake-up, which the request log confirms: one ``GET /issues/:iid`` and no listing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cotal_tasks.bridge.wiring import Endpoint
from cotal_tasks.bridge.wiring.process import Bridge
from cotal_tasks.providers.hosted.sync import MOVED_AT
from cotal_tasks.providers.hosted.tracker import MOVED, TrackedIssue
from tests.bridge._support import Client
from tests.providers.gitlab._support import (
    ISSUES,
    PROJECT,
    SECRET_ENV,
    WEBHOOK_SECRET,
    endpoint_config,
    fetched_iids,
    issue_pages,
    task_id,
)
from tests.providers.hosted_support import (
    add_issues,
    hooked_bridge,
    hosted_parts,
)
from tests.support.fake_gitlab import (
    FakeGitLab,
    gitlab_webhook,
    issue_hook_payload,
    merge_request_hook_payload,
    note_hook_payload,
)
from tests.support.polling import eventually

Json = dict[str, Any]


@dataclass
class Running:
    fake: FakeGitLab
    bridge: Bridge
    http: httpx.AsyncClient

    @property
    def endpoint(self) -> Endpoint:
        return self.bridge.endpoints[0]

    @property
    def client(self) -> Client:
        return Client(self.endpoint.service, self.endpoint.store)

    async def record(self, iid: int) -> Json:
        return await self.client.get(task_id(iid))

    async def status(self, iid: int) -> str:
        return str((await self.record(iid))["status"])

    async def deliver(
        self,
        payload: Json,
        event: str = "Issue Hook",
        token: str | None = WEBHOOK_SECRET,
        **headers: Any,
    ) -> httpx.Response:
        body, sent = gitlab_webhook(token, payload, event, **headers)
        return await self.http.post("/webhooks/gitlab", content=body, headers=sent)

    async def nothing_woken_since(self, mark: int) -> None:
        """Proves, without sleeping, that nothing delivered since ``mark`` woke a refresh:
        a valid delivery for a new issue, numbered above every other (a refresh reads its
        batch in order), is mirrored only after whatever was woken before it was read. So
        once it is mirrored, GitLab must have been asked about that issue alone."""
        fake = self.fake
        iid = int(fake.add_issue(PROJECT, "Delivered after the others")["iid"])
        reply = await self.deliver(issue_hook_payload(fake, PROJECT, iid, "open"))
        assert reply.status_code == 202

        async def mirrored() -> bool:
            tasks = (await self.client.list_tasks(limit=100))["tasks"]
            return task_id(iid) in [t["taskId"] for t in tasks]

        await eventually(mirrored, what=f"the delivery for issue {iid} mirrored")
        own = f"{ISSUES}/{iid}"
        others = [
            r for r in fake.requests[mark:] if r.path != own and not r.path.startswith(own + "/")
        ]
        assert others == []


@pytest.fixture
async def running(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    """A bridge serving the GitLab endpoint, after its first poll of five issues."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    add_issues(gitlab, PROJECT, 5, spacing_s=60)
    endpoint = endpoint_config(gitlab_url, webhook_secret_env=SECRET_ENV)
    async with hooked_bridge(endpoint, tmp_path / "bridge") as (bridge, http):
        yield Running(gitlab, bridge, http)


async def test_a_valid_token_is_accepted_and_the_issue_refreshed_promptly(
    running: Running,
) -> None:
    fake = running.fake
    assert await running.status(3) == "open"
    fake.advance(60)
    fake.close_issue(PROJECT, 3)
    mark = len(fake.requests)

    reply = await running.deliver(issue_hook_payload(fake, PROJECT, 3, "close"))

    assert reply.status_code == 202
    assert reply.json()["message"].startswith("accepted; 1 issue")

    async def refreshed() -> bool:
        return await running.status(3) == "done"

    assert await eventually(refreshed) < 5
    assert fetched_iids(fake, mark) == [3]
    assert issue_pages(fake, mark) == []  # a refresh of the named issue, not a poll


async def test_note_and_merge_request_hooks_name_their_issues(running: Running) -> None:
    """Each wakes the issues it names; a Merge Request Hook also says the project moved
    (kept with its delivery), so the next poll sweeps the merge requests whatever their
    cadence; a Note Hook does not."""
    fake = running.fake
    sync = hosted_parts(running.endpoint).sync

    async def moved() -> Any:
        return await sync.checkpoints.load(sync.key + MOVED_AT)

    fake.advance(60)
    fake.add_note(PROJECT, 2, "Any news?")
    mark = len(fake.requests)

    note = await running.deliver(note_hook_payload(fake, PROJECT, 2), "Note Hook")

    assert note.status_code == 202

    async def links_read() -> bool:
        return bool(fake.calls("GET", f"{ISSUES}/2/related_merge_requests"))

    await eventually(links_read)
    assert fetched_iids(fake, mark) == [2]
    assert await moved() is None
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Fix 4", source_branch="fix-4", closes=[4])
    mark = len(fake.requests)

    merge = await running.deliver(
        merge_request_hook_payload(fake, PROJECT, 1), "Merge Request Hook"
    )

    assert merge.status_code == 202

    async def evidence_read() -> bool:
        evidence: list[Json] = (await running.record(4))["evidence"]
        return any(e["kind"] == "branch" for e in evidence)

    await eventually(evidence_read)
    assert fetched_iids(fake, mark) == [4]
    assert str((await moved())[MOVED]).startswith("gitlab:")


async def test_a_wake_during_a_refresh_is_not_lost(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wake-up that arrives while the loop refreshes another issue is not dropped.
    Deterministic: the refresh of issue 2 is held until the second delivery is in."""
    fake = running.fake
    hosted = hosted_parts(running.endpoint)
    assert hosted is not None
    tracker = hosted.tracker
    fetch = tracker.fetch
    started, release = asyncio.Event(), asyncio.Event()

    async def held_fetch(number: int) -> TrackedIssue | None:
        if number == 2:
            started.set()
            await release.wait()
        return await fetch(number)

    monkeypatch.setattr(tracker, "fetch", held_fetch)
    fake.advance(60)
    fake.add_note(PROJECT, 2, "Any news?")
    fake.close_issue(PROJECT, 4)

    first = await running.deliver(note_hook_payload(fake, PROJECT, 2), "Note Hook")
    await asyncio.wait_for(started.wait(), 5)
    second = await running.deliver(issue_hook_payload(fake, PROJECT, 4, "close"))
    release.set()

    assert (first.status_code, second.status_code) == (202, 202)

    async def refreshed() -> bool:
        return await running.status(4) == "done"

    await eventually(refreshed, within_s=2)  # a woken refresh takes milliseconds


async def test_a_wrong_or_missing_token_is_refused_and_changes_nothing(
    running: Running,
) -> None:
    fake = running.fake
    before = await running.record(4)
    seq = await running.endpoint.store.change_seq()
    fake.advance(60)
    fake.close_issue(PROJECT, 4)
    mark = len(fake.requests)

    for token in ("not the secret", WEBHOOK_SECRET.upper(), WEBHOOK_SECRET[:-1], "", None):
        reply = await running.deliver(issue_hook_payload(fake, PROJECT, 4, "close"), token=token)
        assert reply.status_code == 401, token
        assert "X-Gitlab-Token" in reply.json()["message"]
        assert WEBHOOK_SECRET not in reply.text

    await running.nothing_woken_since(mark)  # GitLab was not asked about issue 4
    assert await running.record(4) == before
    assert await running.endpoint.store.change_seq() == seq + 1  # the new issue's task

    # The same delivery with the right token is taken: the loop was listening all along.
    reply = await running.deliver(issue_hook_payload(fake, PROJECT, 4, "close"))
    assert reply.status_code == 202

    async def refreshed() -> bool:
        return await running.status(4) == "done"

    await eventually(refreshed)


async def test_a_hook_for_a_project_this_bridge_does_not_sync_is_404(running: Running) -> None:
    fake = running.fake
    fake.add_project("acme/elsewhere")
    fake.add_issue("acme/elsewhere", "Not ours")
    reply = await running.deliver(issue_hook_payload(fake, "acme/elsewhere", 1, "open"))
    assert reply.status_code == 404


async def test_a_redelivery_is_acknowledged_without_a_second_refresh(running: Running) -> None:
    """The same delivery again (same ``X-Gitlab-Event-UUID`` and ``Idempotency-Key``)."""
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 5)
    event_uuid, key = str(uuid.uuid4()), str(uuid.uuid4())
    payload = issue_hook_payload(fake, PROJECT, 5, "close")
    mark = len(fake.requests)

    first = await running.deliver(payload, event_uuid=event_uuid, idempotency_key=key)
    assert first.status_code == 202

    async def refreshed() -> bool:
        return await running.status(5) == "done"

    await eventually(refreshed)
    assert fetched_iids(fake, mark) == [5]
    seq = await running.endpoint.store.change_seq()
    mark = len(fake.requests)

    again = await running.deliver(payload, event_uuid=event_uuid, idempotency_key=key)

    assert again.status_code == 200
    assert again.json()["message"] == "delivery already received"
    await running.nothing_woken_since(mark)
    assert await running.endpoint.store.change_seq() == seq + 1  # the new issue's task


async def test_gitlab_retrying_a_delivery_is_recognised_by_its_idempotency_key(
    running: Running,
) -> None:
    """GitLab keeps ``Idempotency-Key`` across retries of one delivery (gitlab#388692,
    !160952); ``X-Gitlab-Event-UUID`` comes from the request that sends it, so a retry
    carries a new one."""
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 5)
    key = str(uuid.uuid4())
    payload = issue_hook_payload(fake, PROJECT, 5, "close")
    first = await running.deliver(payload, event_uuid=str(uuid.uuid4()), idempotency_key=key)
    assert first.status_code == 202

    async def refreshed() -> bool:
        return await running.status(5) == "done"

    await eventually(refreshed)
    mark = len(fake.requests)

    retry = await running.deliver(payload, event_uuid=str(uuid.uuid4()), idempotency_key=key)

    assert retry.status_code == 200
    await running.nothing_woken_since(mark)


async def test_two_deliveries_sharing_an_event_uuid_are_both_accepted(running: Running) -> None:
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 1)
    fake.close_issue(PROJECT, 2)
    shared = str(uuid.uuid4())  # one request (e.g. a bulk edit) fired both hooks
    first = await running.deliver(issue_hook_payload(fake, PROJECT, 1, "close"), event_uuid=shared)
    assert first.status_code == 202

    async def refreshed(iid: int) -> bool:
        return await running.status(iid) == "done"

    await eventually(lambda: refreshed(1))

    second = await running.deliver(issue_hook_payload(fake, PROJECT, 2, "close"), event_uuid=shared)

    assert second.status_code == 202
    await eventually(lambda: refreshed(2), within_s=3)


async def test_the_hooks_one_request_fires_are_told_apart_before_gitlab_16_2(
    running: Running,
) -> None:
    """GitLab before 16.2 sends neither ``Idempotency-Key`` nor ``X-Gitlab-Webhook-UUID``,
    and every hook one request fires shares its ``X-Gitlab-Event-UUID``. Before, the Issue
    Hook that followed that request's Merge Request Hook was answered "delivery already
    received" and its refresh lost until the next poll; a redelivery of one hook is still
    recognised."""
    fake = running.fake
    fake.advance(60)
    fake.add_merge_request(PROJECT, "Fix the parser", source_branch="fix")
    fake.close_issue(PROJECT, 4)
    shared = str(uuid.uuid4())  # the merge that closed issue 4 fired both hooks

    async def old_gitlab(payload: Json, event: str) -> httpx.Response:
        body, sent = gitlab_webhook(WEBHOOK_SECRET, payload, event, event_uuid=shared)
        newer = ("Idempotency-Key", "X-Gitlab-Webhook-UUID")
        headers = {k: v for k, v in sent.items() if k not in newer}
        return await running.http.post("/webhooks/gitlab", content=body, headers=headers)

    merged = await old_gitlab(merge_request_hook_payload(fake, PROJECT, 1), "Merge Request Hook")
    assert merged.is_success, merged.text
    closed = await old_gitlab(issue_hook_payload(fake, PROJECT, 4, "close"), "Issue Hook")
    assert closed.status_code == 202, closed.text

    async def refreshed() -> bool:
        return await running.status(4) == "done"

    await eventually(refreshed, within_s=5)
    again = await old_gitlab(issue_hook_payload(fake, PROJECT, 4, "close"), "Issue Hook")
    assert again.status_code == 200
    assert again.json()["message"] == "delivery already received"


async def test_the_listener_answers_without_nagles_delay(running: Running) -> None:
    """20 refused deliveries (the cheapest answer the listener gives): without the delay
    they take ~35 ms in all here, with it ~850 ms. The bound leaves a wide margin."""
    body, headers = gitlab_webhook("wrong", issue_hook_payload(running.fake, PROJECT, 1))
    start = time.monotonic()
    for _ in range(20):
        reply = await running.http.post("/webhooks/gitlab", content=body, headers=headers)
        assert reply.status_code == 401
    assert time.monotonic() - start < 0.4


async def test_a_work_item_hook_refreshes_its_issue(running: Running) -> None:
    """GitLab 17.x sends tasks, and issues edited in the new UI, as an Issue Hook whose
    ``object_kind`` is ``work_item``: it wakes the sync like any Issue Hook."""
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 4)
    mark = len(fake.requests)
    payload = issue_hook_payload(fake, PROJECT, 4, "close")
    payload["object_kind"] = payload["event_type"] = "work_item"
    payload["object_attributes"] = {**payload["object_attributes"], "type": "Task"}

    reply = await running.deliver(payload)

    assert reply.status_code == 202
    assert reply.json()["message"] == "accepted; 1 issue(s) to refresh"

    async def refreshed() -> bool:
        return await running.status(4) == "done"

    await eventually(refreshed)
    assert fetched_iids(fake, mark) == [4]


async def test_a_renamed_project_keeps_its_deliveries(running: Running) -> None:
    """Deliveries match on the stable project id (learned from the project's issues), so
    after a rename (a new ``path_with_namespace``, the same ``id``) they keep working."""
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 2)
    payload = issue_hook_payload(fake, PROJECT, 2, "close")
    payload["project"] = {
        **payload["project"],
        "path_with_namespace": "acme/widgets-renamed",
        "name": "Widgets Renamed",
    }

    reply = await running.deliver(payload)

    assert reply.status_code == 202  # before: 404, and GitLab disables a failing hook

    async def refreshed() -> bool:
        return await running.status(2) == "done"

    await eventually(refreshed)
    # Another project (another id) under any path is still not ours.
    stranger = issue_hook_payload(fake, PROJECT, 2, "close")
    stranger["project"] = {**stranger["project"], "id": 999_999, "path_with_namespace": "x/y"}
    assert (await running.deliver(stranger)).status_code == 404


@pytest.mark.parametrize("kept", [(), ("X-Gitlab-Webhook-UUID",)])
async def test_a_delivery_of_an_older_gitlab_without_delivery_ids_is_taken(
    running: Running, kept: tuple[str, ...]
) -> None:
    """Older GitLab releases send none of ``Idempotency-Key``, ``X-Gitlab-Event-UUID``
    (or only the webhook's UUID, which names the hook, not the delivery): the delivery is
    taken and wakes the refresh; a repeat is not deduplicated (it refreshes again)."""
    fake = running.fake
    fake.advance(60)
    fake.close_issue(PROJECT, 3)
    body, sent = gitlab_webhook(WEBHOOK_SECRET, issue_hook_payload(fake, PROJECT, 3, "close"))
    ids = ("Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID")
    headers = {k: v for k, v in sent.items() if k not in ids or k in kept}
    mark = len(fake.requests)

    reply = await running.http.post("/webhooks/gitlab", content=body, headers=headers)

    assert reply.status_code == 202, reply.text

    async def refreshed() -> bool:
        return await running.status(3) == "done"

    await eventually(refreshed, within_s=5)
    assert fetched_iids(fake, mark) == [3]
    again = await running.http.post("/webhooks/gitlab", content=body, headers=headers)
    assert again.status_code == 202  # not taken for the first one: no id to say so


async def test_a_merge_request_naming_thousands_of_issues_wakes_one_poll(
    running: Running,
) -> None:
    """Before: every issue a merge request's description mentions was refreshed one by
    one (5,000 mentions, 5,000 reads and more). Now more than ``webhook_max_issues`` wake
    one poll, and no issue is read for the mentions."""
    fake = running.fake
    fake.add_merge_request(PROJECT, "Touches everything", source_branch="wide")
    payload = merge_request_hook_payload(fake, PROJECT, 1)
    payload["object_attributes"]["description"] = " ".join(f"#{n}" for n in range(10, 5010))
    mark = len(fake.requests)

    reply = await running.deliver(payload, "Merge Request Hook")

    assert reply.status_code == 202
    assert "more than webhook_max_issues (20)" in reply.json()["message"]

    async def polled() -> bool:
        return any(r.path == ISSUES for r in fake.requests[mark:])

    await eventually(polled)
    assert [iid for iid in fetched_iids(fake, mark) if iid >= 10] == []
