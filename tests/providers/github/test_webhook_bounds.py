"""``POST /webhooks/github`` against hostile senders, on the real listener of a running
bridge: unverified deliveries all answered alike and never decoded, bodies bounded while
they are read, an empty or short secret refused at start, and a delivery naming
thousands of issues costing the tracker a bounded number of reads while the regular poll
keeps its interval."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig, HttpLimits
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge
from cotal_tasks.core import ContractError, ErrorCode
from tests.providers.github._support import (
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    fetched_issue_numbers,
    github_config,
    list_requests,
)
from tests.providers.hosted_support import SPACE, add_issues, first_sync
from tests.support.fake_github import (
    FakeGitHub,
    issues_payload,
    pull_request_payload,
    signed_webhook,
)
from tests.support.polling import eventually

LIMITS = HttpLimits(webhook_max_body_bytes=1 << 20, body_timeout_s=1.0)
POLL_S = 1.0


@dataclass
class Hooked:
    fake: FakeGitHub
    bridge: Bridge

    @property
    def url(self) -> str:
        assert self.bridge.http_url is not None
        return self.bridge.http_url

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url) as http:
            return await http.post("/webhooks/github", content=body, headers=headers)

    async def deliver(self, event: str, payload: Any, **headers: str) -> httpx.Response:
        body, signed = signed_webhook(WEBHOOK_SECRET, event, payload)
        return await self.post(body, {**signed, **headers})


def config(tmp_path: Path, api_url: str, **overrides: Any) -> BridgeConfig:
    settings = github_config(api_url, webhook_secret_env=SECRET_ENV, **overrides)
    return BridgeConfig(
        space=SPACE,
        data_dir=tmp_path / "bridge",
        http=HttpConfig(port=0, limits=LIMITS),
        endpoints=(EndpointConfig(name="com.acme.github", settings=settings),),
    )


@pytest.fixture
async def hooked(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Hooked]:
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    add_issues(fake, REPO, 5, spacing_s=10)
    async with running_bridge(config(tmp_path, github_url, poll_interval_s=POLL_S)) as bridge:
        await first_sync(bridge)
        yield Hooked(fake, bridge)


async def test_unverified_deliveries_are_answered_alike_synced_or_not(hooked: Hooked) -> None:
    """Before: 401 for a synced repository, 404 for another (a stranger learnt what is
    synced)."""
    ours = issues_payload(hooked.fake, "opened", REPO, 1)
    theirs = json.loads(json.dumps(ours))
    theirs["repository"].update(full_name="octo-org/secret-project", id=424_242)
    answers = []
    for payload in (ours, theirs):
        body, headers = signed_webhook("not the secret at all, guessed", "issues", payload)
        answers.append(await hooked.post(body, headers))
    assert [a.status_code for a in answers] == [401, 401]
    assert answers[0].json() == answers[1].json()


async def test_an_unverified_body_is_never_decoded(hooked: Hooked) -> None:
    """A body of nested brackets raised RecursionError: a plain-text 500 without the
    security headers, a traceback per request. Unsigned it is now refused before it is
    parsed; signed it is a 400 in the usual shape."""
    nested = b"[" * 200_000
    _, headers = signed_webhook("wrong secret, sixteen chars+", "issues", b"{}")
    unsigned = await hooked.post(nested, headers)
    assert unsigned.status_code == 401
    body, headers = signed_webhook(WEBHOOK_SECRET, "issues", nested)
    signed = await hooked.post(body, headers)
    assert signed.status_code == 400
    assert signed.headers["x-content-type-options"] == "nosniff"
    assert signed.headers["content-security-policy"].startswith("default-src 'none'")
    assert "JSON" in signed.json()["message"]


async def _raw(url: str, head: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = httpx.URL(url).host, httpx.URL(url).port
    assert port is not None
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(head)
    await writer.drain()
    return reader, writer


async def test_a_body_over_the_limit_is_refused_while_it_arrives(hooked: Hooked) -> None:
    """Before: the whole body was buffered (100 MiB took the process from 95 to 395 MiB).
    Now a declared length over the limit is refused before any of the body is read, and a
    chunked body is cut off once the limit is passed: the sender cannot push 64 MiB."""
    most = LIMITS.webhook_max_body_bytes
    reader, writer = await _raw(
        hooked.url,
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % (most + 1),
    )
    status = await asyncio.wait_for(reader.readline(), 5)
    assert status.startswith(b"HTTP/1.1 413"), status
    writer.close()

    reader, writer = await _raw(
        hooked.url,
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n",
    )
    answered = asyncio.create_task(reader.readline())  # read while sending
    chunk = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
    sent = 0

    async def push() -> None:
        nonlocal sent
        async with asyncio.timeout(10):
            while sent < 64 << 20:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)

    with pytest.raises((ConnectionError, TimeoutError)):  # the bridge stops reading, closes
        await push()
    assert (await answered).startswith(b"HTTP/1.1 413")
    assert sent < 16 * most  # what the socket buffers held, not the 64 MiB
    writer.close()


async def test_a_dripped_body_is_cut_off_at_the_body_timeout(hooked: Hooked) -> None:
    reader, writer = await _raw(
        hooked.url,
        b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
    )
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def drip() -> None:
        for _ in range(100):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.2)

    dripping = asyncio.create_task(drip())
    try:
        status = await asyncio.wait_for(reader.readline(), 5)
    finally:
        dripping.cancel()
        writer.close()
    assert status.startswith(b"HTTP/1.1 408"), status
    assert loop.time() - started < LIMITS.body_timeout_s + 2


@pytest.mark.parametrize("value", ["", "short"])
async def test_an_empty_or_short_secret_stops_the_bridge(
    value: str, fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``GITHUB_WEBHOOK_SECRET=`` turned verification off (anyone signs with the
    empty key)."""
    monkeypatch.setenv(SECRET_ENV, value)
    with pytest.raises(ContractError) as caught:
        async with running_bridge(config(tmp_path, github_url)):
            pass
    assert caught.value.code is ErrorCode.FAILED_PRECONDITION
    assert SECRET_ENV in caught.value.message
    assert "openssl rand" in caught.value.message


def mentioning(hooked: Hooked, numbers: range) -> dict[str, Any]:
    fake = hooked.fake
    pr = fake.add_pull(REPO, "Touches everything", head_ref="wide")
    payload = pull_request_payload(fake, "opened", REPO, int(str(pr["number"])))
    payload["pull_request"]["body"] = " ".join(f"#{n}" for n in numbers)
    return payload


async def test_a_delivery_naming_thousands_of_issues_wakes_one_poll(hooked: Hooked) -> None:
    """Before: a pull request mentioning #10 … #5009 queued 5,000 issue refreshes (10,000
    requests), and no regular poll ran meanwhile; a comment sent the list again."""
    fake = hooked.fake
    mark = len(fake.requests)
    payload = mentioning(hooked, range(10, 5010))

    answer = await hooked.deliver("pull_request", payload)
    again = await hooked.deliver("pull_request", payload)  # the comment's list, once more

    assert (answer.status_code, again.status_code) == (202, 202)
    assert "more than webhook_max_issues (20)" in answer.json()["message"]

    async def polled_twice() -> bool:
        return len(list_requests(fake, mark)) >= 2

    await eventually(polled_twice, within_s=10)
    assert [n for n in fetched_issue_numbers(fake, mark) if n >= 10] == []


async def test_refreshes_are_rate_limited_and_the_poll_keeps_its_interval(
    hooked: Hooked,
) -> None:
    """Deliveries under the per-delivery cap, many of them: the refreshes come out at
    ``webhook_refreshes_per_minute`` (30, a bucket of 30), the same issue named twice is
    read once, and the poll runs every second all the same."""
    fake = hooked.fake
    mark = len(fake.requests)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for start in range(10, 1010, 20):
        payload = mentioning(hooked, range(start, start + 20))
        assert (await hooked.deliver("pull_request", payload)).status_code == 202
    again = mentioning(hooked, range(990, 1010))  # still waiting: nothing more to read
    assert (await hooked.deliver("pull_request", again)).status_code == 202
    await asyncio.sleep(3 * POLL_S)

    wide = [n for n in fetched_issue_numbers(fake, mark) if n >= 10]
    refilled = (loop.time() - started) * 30 / 60  # 30 a minute since the first delivery
    assert 0 < len(wide) <= 30 + refilled + 1  # the bucket, and what the time added to it
    assert len(wide) < 100  # of the 1,000 named
    assert len(wide) == len(set(wide))
    assert len(list_requests(fake, mark)) >= 2
