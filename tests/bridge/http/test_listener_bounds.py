"""The listener's bounds on a real bridge (``[http.limits]``): slow request heads cut at
the head deadline, connections past the cap answered 503 with ``Retry-After`` at once,
requests past the concurrency cap shed the same way, and event streams capped per token
and in all; the wire and the store keep working throughout. The hostile clients are raw
sockets on loopback, bounded in count and time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.config import HttpLimits
from cotal_tasks.providers.store import Page, PageQuery, TaskStore
from tests.bridge.http._support import (
    ACME,
    NO_UID_ENV,
    READER_ENV,
    TOKENS,
    HttpMesh,
    bearer,
    open_http_mesh,
    set_secrets,
)
from tests.conftest import seat

OPERATOR = seat("operator", 9)
LIMITS = HttpLimits(header_timeout_s=1.0, max_connections=20, max_requests=2, retry_after_s=7)


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, limits=LIMITS) as opened:
        yield opened


async def connect(mesh: HttpMesh) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = httpx.URL(mesh.url)
    assert url.port is not None
    return await asyncio.open_connection(url.host, url.port)


async def the_wire_answers(mesh: HttpMesh) -> None:
    operator = mesh.caller(OPERATOR)
    made = await operator.ok("create-task", {"title": "still served"})
    got = await operator.ok("get-task", {"taskId": made["taskId"]})
    assert got["title"] == "still served"


async def test_slow_heads_are_cut_at_the_head_deadline(mesh: HttpMesh) -> None:
    """Before: 200 connections sending a byte every 15 s all stayed open."""
    slow = [await connect(mesh) for _ in range(10)]
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        with contextlib.suppress(ConnectionError):
            for _ in range(40):  # at most 8 s of dripping
                if reader.at_eof():
                    break
                writer.write(b"a")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(reader.read(), 0.2)
        return b""

    dripped = asyncio.gather(*(drip(r, w) for r, w in slow))
    await the_wire_answers(mesh)  # while they drip
    answers = await asyncio.wait_for(dripped, 10)
    took = loop.time() - started
    assert all(answer == b"" for answer in answers)  # closed, nothing answered
    assert all(reader.at_eof() for reader, _ in slow)
    assert took < LIMITS.header_timeout_s + 3
    for _, writer in slow:
        writer.close()
    assert (await mesh.get("/healthz")).status_code == 200


async def test_connections_past_the_cap_are_refused_with_retry_after(
    mesh: HttpMesh, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: no cap; under a 256 open-file limit 300 idle connections broke the board
    (``unable to open database file``) and ``/healthz``, and wrote 130 MB of log in 45 s."""
    held = [await connect(mesh) for _ in range(LIMITS.max_connections)]
    refusals = []
    for _ in range(30):
        reader, writer = await connect(mesh)
        refusals.append(await asyncio.wait_for(reader.read(), 5))
        writer.close()
    head, _, body = refusals[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503")
    assert b"retry-after: 7" in head
    assert b"max_connections" not in body  # says what to do, not the configuration
    assert b"Retry after" in body
    assert all(r == refusals[0] for r in refusals)
    shed = [r for r in caplog.records if "shedding load" in r.getMessage()]
    assert len(shed) == 1  # once a minute, with the count, never once per refusal
    await the_wire_answers(mesh)  # the wire and the store keep working meanwhile
    for _, held_writer in held:
        held_writer.close()
    await asyncio.sleep(0.2)
    assert (await mesh.get("/healthz")).status_code == 200


class GatedStore:
    """The endpoint's real store, its page reads held until ``gate`` opens."""

    def __init__(self, inner: TaskStore, gate: asyncio.Event) -> None:
        self.inner, self.gate = inner, gate

    async def page(self, query: PageQuery) -> Page:
        await self.gate.wait()
        return await self.inner.page(query)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def test_requests_past_the_concurrency_cap_are_shed(mesh: HttpMesh) -> None:
    service = mesh.endpoint(ACME).service
    gate = asyncio.Event()
    service.store = GatedStore(service.store, gate)  # type: ignore[assignment]
    path = "/healthz"  # its probe reads a page of the store
    held = [asyncio.create_task(mesh.get(path)) for _ in range(LIMITS.max_requests)]
    await asyncio.sleep(0.3)  # both are in, waiting on the store
    assert not any(h.done() for h in held)

    shed = await asyncio.wait_for(mesh.get(f"/v1/endpoints/{ACME}/tasks"), 5)

    assert shed.status_code == 503
    assert shed.headers["retry-after"] == "7"
    assert shed.headers["x-content-type-options"] == "nosniff"
    assert shed.json()["error"]["code"] == "unavailable"
    gate.set()
    assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
    assert (await mesh.get(path)).status_code == 200


async def test_event_streams_are_capped_per_token_and_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: 2,000 streams opened on one token."""
    set_secrets(monkeypatch)
    limits = HttpLimits(max_streams=3, max_streams_per_token=2, retry_after_s=7)
    async with (
        open_http_mesh(tmp_path, tokens=TOKENS, limits=limits) as mesh,
        contextlib.AsyncExitStack() as open_,
    ):

        async def stream(env: str) -> httpx.Response:
            return await open_.enter_async_context(
                mesh.http.stream("GET", "/v1/events", headers=bearer(env))
            )

        first = [await stream(READER_ENV) for _ in range(2)]
        assert [s.status_code for s in first] == [200, 200]
        third = await stream(READER_ENV)
        assert (third.status_code, third.headers["retry-after"]) == (429, "7")
        assert (await third.aread()).find(b"max_streams_per_token") > 0
        other = await stream(NO_UID_ENV)
        assert other.status_code == 200  # another token: three in all
        full = await stream(NO_UID_ENV)
        assert (full.status_code, full.headers["retry-after"]) == (503, "7")
        await first[0].aclose()  # a stream ends: its place is given back
        await asyncio.sleep(0.2)
        again = await stream(NO_UID_ENV)
        assert again.status_code == 200
