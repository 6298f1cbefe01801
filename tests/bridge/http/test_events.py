"""``GET /v1/events``: a commit anywhere (here a claim over the wire) wakes every stream with
``board-changed`` carrying exactly endpoint, changeSeq and observedAt."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.http.app import create_app
from cotal_tasks.bridge.http.auth import Tokens
from cotal_tasks.bridge.http.context import HttpContext
from cotal_tasks.bridge.http.events import EventHub
from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.bridge.wiring.http import build_http_app, served_endpoint
from tests.bridge.http._support import ACME, OPS, HttpMesh, open_http_mesh
from tests.conftest import seat

OPERATOR = seat("operator", 9)
BUILDER = seat("builder", 1)
WAIT_S = 10


@dataclass
class Block:
    event: str | None
    data: str | None
    comments: list[str]


async def next_block(lines: AsyncIterator[str]) -> Block:
    """The next blank-line-terminated block of the stream."""
    block = Block(None, None, [])

    async def read() -> Block:
        async for line in lines:
            if line == "":
                if block.event or block.data or block.comments:
                    return block
                continue
            if line.startswith(":"):
                block.comments.append(line[1:].strip())
            elif line.startswith("event:"):
                block.event = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                block.data = line.removeprefix("data:").strip()
        raise EOFError("the stream ended")

    return await asyncio.wait_for(read(), WAIT_S)


async def next_event(lines: AsyncIterator[str]) -> Block:
    while True:
        block = await next_block(lines)
        if block.event is not None:
            return block


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, names=(ACME, OPS)) as running:
        yield running


async def test_a_wire_claim_is_one_board_changed_event(mesh: HttpMesh) -> None:
    task = await mesh.caller(OPERATOR).ok("create-task", {"title": "x"})
    async with mesh.http.stream("GET", "/v1/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        lines = response.aiter_lines()
        assert "connected" in (await next_block(lines)).comments  # subscribed from here on
        await mesh.caller(BUILDER).ok("claim-task", {"taskId": task["taskId"]}, mode="self")
        block = await next_event(lines)
    assert block.event == "board-changed"
    assert block.data is not None
    data = json.loads(block.data)
    assert set(data) == {"endpoint", "changeSeq", "observedAt"}
    page = await mesh.ok(f"/v1/endpoints/{ACME}/tasks")
    assert data["endpoint"] == ACME
    assert data["changeSeq"] == page["changeSeq"] == 2
    assert isinstance(data["observedAt"], int)
    assert data["observedAt"] > 1_600_000_000_000
    assert task["taskId"] not in block.data
    assert "claimed" not in block.data


async def test_every_endpoint_and_every_stream_hears_its_changes(mesh: HttpMesh) -> None:
    async with (
        mesh.http.stream("GET", "/v1/events") as first,
        mesh.http.stream("GET", "/v1/events") as second,
    ):
        streams = [first.aiter_lines(), second.aiter_lines()]
        for lines in streams:
            await next_block(lines)
        await mesh.caller(OPERATOR, OPS).ok("create-task", {"title": "ops"})
        await mesh.caller(OPERATOR, ACME).ok("create-task", {"title": "acme"})
        for lines in streams:
            heard = [json.loads((await next_event(lines)).data or "") for _ in range(2)]
            assert [(e["endpoint"], e["changeSeq"]) for e in heard] == [(OPS, 1), (ACME, 1)]


async def test_a_quiet_stream_carries_keep_alive_comments(mesh: HttpMesh) -> None:
    # A second listener over the same endpoints, with a short keep-alive interval.
    bridge = mesh.bridge
    app = build_http_app(bridge.config, bridge.endpoints, bridge.metrics, keepalive_s=0.2)
    async with (
        app.serve("127.0.0.1", 0) as url,
        httpx.AsyncClient(base_url=url) as http,
        http.stream("GET", "/v1/events") as response,
    ):
        lines = response.aiter_lines()
        await next_block(lines)
        comments = [(await next_block(lines)).comments for _ in range(3)]
    assert comments == [["keep-alive"]] * 3


async def test_open_streams_end_when_the_bridge_stops(tmp_path: Path) -> None:
    opened = open_http_mesh(tmp_path)
    mesh = await opened.__aenter__()
    http = httpx.AsyncClient(base_url=mesh.url, timeout=30)
    try:
        response = await http.send(http.build_request("GET", "/v1/events"), stream=True)
        lines = response.aiter_lines()
        await next_block(lines)
        started = time.monotonic()
        await opened.__aexit__(None, None, None)
        assert time.monotonic() - started < 4  # not held open for the graceful timeout
        with pytest.raises((EOFError, httpx.HTTPError)):
            await next_block(lines)
        await response.aclose()
    finally:
        await http.aclose()


async def test_a_slow_reader_keeps_the_newest_wakes() -> None:
    hub = EventHub(queue_size=4)
    with hub.subscribe() as queue:
        for seq in range(1, 11):
            hub.publish({"endpoint": ACME, "changeSeq": seq, "observedAt": seq})
        held = [queue.get_nowait() for _ in range(queue.qsize())]
    assert [event["changeSeq"] for event in held if event is not None] == [7, 8, 9, 10]
    assert hub.streams == 0
    hub.close()
    with hub.subscribe() as late:
        assert late.get_nowait() is None  # a stream opened while stopping ends at once


async def test_the_feed_hears_what_the_wiring_attached_and_the_app_attaches_nothing(
    tmp_path: Path,
) -> None:
    config = BridgeConfig(
        data_dir=tmp_path, http=HttpConfig(port=0), endpoints=(EndpointConfig(name=ACME),)
    )
    async with open_endpoint(config, config.endpoints[0]) as endpoint:
        wired = build_http_app(config, [endpoint], Metrics())
        # An app over a feed nobody attached: create_app must not attach it either.
        bare_feed = EventHub()
        context = HttpContext(
            config,
            {ACME: served_endpoint(endpoint)},
            Metrics(),
            Tokens.load(config, {}),
            bare_feed,
        )
        create_app(context)
        with wired.events.subscribe() as wired_queue, bare_feed.subscribe() as bare_queue:
            call = Call("create-task", OPERATOR, "e-feed-1", {"title": "heard"})
            created = await endpoint.service.handle(call)
            heard = wired_queue.get_nowait()
            assert bare_queue.empty()
    assert heard is not None
    assert (heard["endpoint"], heard["changeSeq"]) == (ACME, 1)
    assert created["taskId"]
