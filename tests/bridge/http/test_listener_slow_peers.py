"""The listener under slow and idle peers, on a real bridge with a GitHub endpoint (the
fake GitHub on loopback, its webhook secret set): ``/healthz`` and a signed webhook are
answered while 64 slow readers (a small receive buffer, ``GET /v1/openapi.json``
pipelined, nothing ever read) and 300 idle sockets press on it, each peer from its own
loopback address; a peer that does not read its answer is cut at the write deadline,
and the next pipelined request waits for the answer before it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig, HttpLimits
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge
from tests.providers.github._support import (
    REPO,
    SECRET_ENV,
    TOKEN_ENV,
    WEBHOOK_SECRET,
    endpoint_config,
)
from tests.providers.hosted_support import SPACE, add_issues, first_sync
from tests.support.fake_github import (
    FakeGitHub,
    issues_payload,
    serve_fake_github,
    signed_webhook,
)
from tests.support.peers import (
    PIPELINE,
    backed_up,
    cut,
    hostile_peers,
    listener_ends,
    pipelined,
)
from tests.support.polling import eventually

SLOW_READERS, IDLE = 16, 300


@dataclass
class Listener:
    fake: FakeGitHub
    bridge: Bridge
    http: httpx.AsyncClient

    @property
    def port(self) -> int:
        port = self.http.base_url.port
        assert port is not None
        return port

    async def answered(self) -> tuple[int, int]:
        """The status of ``/healthz`` and of a signed ``issues`` delivery, each asked on a
        connection of its own (as a probe and GitHub ask)."""
        health = await self.http.get("/healthz", headers={"Connection": "close"})
        body, headers = signed_webhook(
            WEBHOOK_SECRET, "issues", issues_payload(self.fake, "edited", REPO, 1)
        )
        hook = await self.http.post(
            "/webhooks/github", content=body, headers={**headers, "Connection": "close"}
        )
        return health.status_code, hook.status_code


@asynccontextmanager
async def listening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: HttpLimits
) -> AsyncIterator[Listener]:
    """The bridge, a board endpoint beside the GitHub one, listening within ``limits``."""
    fake = FakeGitHub()
    add_issues(fake, REPO, 3)
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    async with serve_fake_github(fake) as api_url:
        endpoint = endpoint_config(api_url, webhook_secret_env=SECRET_ENV)
        config = BridgeConfig(
            space=SPACE,
            data_dir=tmp_path / "bridge",
            http=HttpConfig(port=0, limits=limits),
            endpoints=(EndpointConfig(name="com.acme.board"), endpoint),
        )
        async with running_bridge(config) as bridge:
            await first_sync(bridge)
            assert bridge.http_url is not None
            async with httpx.AsyncClient(base_url=bridge.http_url, timeout=15) as http:
                yield Listener(fake, bridge, http)


@pytest.fixture
async def listener(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Listener]:
    """The bridge with the listener's default bounds, but for a quarter of the requests
    answered at once (as many slow readers as that take them all, in a quarter of the
    time: each must be sent about 4 MiB of answers before the kernel stops taking them)."""
    limits = HttpLimits(max_requests=SLOW_READERS)
    async with listening(tmp_path, monkeypatch, limits) as opened:
        yield opened


async def answered_throughout(
    listener: Listener, seconds: float, until: Callable[[], bool] = lambda: True
) -> None:
    """``/healthz`` and a signed webhook answered (200, 202), asked again and again for
    ``seconds`` at least, and on until ``until()`` (within a minute and a half)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while loop.time() < started + seconds or not until():
        assert loop.time() < started + 90, "the load never came"
        assert await listener.answered() == (200, 202)
        await asyncio.sleep(0.2)


async def test_probes_and_webhooks_are_answered_under_slow_readers(listener: Listener) -> None:
    """Before: once the slow readers' answers filled the kernel's buffers (a few seconds),
    every route answered 503 for as long as they stayed."""
    assert await listener.answered() == (200, 202)
    with hostile_peers("127.0.0.1", listener.port) as peers:
        readers = await peers.slow_readers(SLOW_READERS, "/v1/openapi.json")
        seen: set[int] = set()

        def each_backed_up() -> bool:
            seen.update(n for n, waits in enumerate(backed_up(readers)) if waits)
            return len(seen) == len(readers)

        # On and on, until each reader's answers have waited (a few seconds here), and
        # some more: on the old listener each then held a request slot.
        await answered_throughout(listener, 10.0, until=each_backed_up)
        await answered_throughout(listener, 5.0)
        # Each was written no more than its send buffer holds (the kernel doubles the
        # setting) before it was behind, not the 4 MiB the kernel grows one to by itself.
        most = 2 * HttpLimits().send_buffer_bytes
        assert all(end is None or end[1] <= most for end in listener_ends(readers))
        read = await listener.http.get("/v1/openapi.json")  # the read API too: no slot is held
        assert read.status_code == 200


async def test_probes_and_webhooks_are_answered_under_idle_sockets(listener: Listener) -> None:
    """Before: past 256 connections every new one was refused, the probe's too."""
    with hostile_peers("127.0.0.1", listener.port) as peers:
        await peers.idle(IDLE)
        await answered_throughout(listener, 3.0)


async def test_a_peer_that_does_not_read_is_cut_at_the_write_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a peer that never read held its connection, and the request waiting on it,
    for as long as it stayed."""
    async with listening(tmp_path, monkeypatch, HttpLimits(write_timeout_s=1.0)) as listener:
        with hostile_peers("127.0.0.1", listener.port) as peers:
            readers = await peers.slow_readers(4, "/v1/openapi.json")
            await eventually(lambda: all(cut(readers)), within_s=30)
        said = [r.getMessage() for r in caplog.records if "shedding load" in r.getMessage()]
        assert len(said) == 1
        assert "slow readers" in said[0]

        # A peer that pipelines as much and reads is answered every request, in order.
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        last = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        writer.write(pipelined("/v1/openapi.json", PIPELINE) + last)
        answers = await asyncio.wait_for(reader.read(), 60)
        writer.close()
        assert answers.count(b"HTTP/1.1 200 OK\r\n") == PIPELINE + 1
        assert answers.rstrip().endswith(
            b'"live":true,"endpoints":{"com.acme.board":'
            b'{"ready":true},"com.acme.github":{"ready":true}}}'
        )
