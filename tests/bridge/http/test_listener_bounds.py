"""The listener's bounds on a real bridge (``[http.limits]``): slow request heads cut at
the head deadline; past the connection cap the connection idle longest dropped to make
room, and a newcomer answered 503 with ``Retry-After`` at once when every connection has
a request running; one peer's connections capped; each kind of request within its own
budget (reads shed while probes and webhooks answer); event streams capped per token
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
from cotal_tasks.providers.store import Page, PageQuery, RecordPage, TaskStore
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
from tests.support.peers import peer_address

OPERATOR = seat("operator", 9)
LIMITS = HttpLimits(
    header_timeout_s=1.0,
    max_connections=6,
    max_connections_per_peer=8,
    max_requests=6,
    max_probe_requests=2,
    retry_after_s=7,
)


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, limits=LIMITS) as opened:
        yield opened


async def connect(
    mesh: HttpMesh, peer: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the listener, from the ``peer``-th loopback address when given."""
    url = httpx.URL(mesh.url)
    assert url.port is not None
    source = None if peer is None else (peer_address(peer), 0)
    return await asyncio.open_connection(url.host, url.port, local_addr=source)


async def the_wire_answers(mesh: HttpMesh) -> None:
    operator = mesh.caller(OPERATOR)
    made = await operator.ok("create-task", {"title": "still served"})
    got = await operator.ok("get-task", {"taskId": made["taskId"]})
    assert got["title"] == "still served"


async def test_slow_heads_are_cut_at_the_head_deadline(mesh: HttpMesh) -> None:
    """Before: 200 connections sending a byte every 15 s all stayed open."""
    slow = [await connect(mesh) for _ in range(LIMITS.max_connections - 1)]
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


class HeldReads:
    """The endpoint's real store, its reads of more than one task held until ``gate``
    opens (the health probe reads one, and is answered)."""

    def __init__(self, inner: TaskStore, gate: asyncio.Event) -> None:
        self.inner, self.gate = inner, gate

    async def page(self, query: PageQuery) -> Page:
        if query.limit != 1:
            await self.gate.wait()
        return await self.inner.page(query)

    async def page_records(self, query: PageQuery) -> RecordPage:
        await self.gate.wait()
        return await self.inner.page_records(query)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def hold_reads(mesh: HttpMesh) -> asyncio.Event:
    """Hold the endpoint's list reads until the returned event is set."""
    service = mesh.endpoint(ACME).service
    gate = asyncio.Event()
    service.store = HeldReads(service.store, gate)  # type: ignore[assignment]
    service.json_reads = None  # its reads go through the store
    return gate


async def reading(mesh: HttpMesh, peer: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection from the ``peer``-th address whose list read is in (and held, under
    ``hold_reads``)."""
    reader, writer = await connect(mesh, peer)
    writer.write(f"GET /v1/endpoints/{ACME}/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def test_connections_past_the_cap_are_refused_when_none_is_idle(
    mesh: HttpMesh, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: no cap; under a 256 open-file limit 300 idle connections broke the board
    (``unable to open database file``) and ``/healthz``, and wrote 130 MB of log in 45 s."""
    gate = hold_reads(mesh)
    held = [await reading(mesh, n) for n in range(LIMITS.max_connections)]
    await asyncio.sleep(0.3)  # every read is in, waiting on the store
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
    gate.set()
    for reader, writer in held:  # the held reads are answered, none was dropped
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).startswith(b"HTTP/1.1 200")
        writer.close()
    await asyncio.sleep(0.2)
    assert (await mesh.get("/healthz")).status_code == 200


async def closed(reader: asyncio.StreamReader) -> bool:
    """Whether the listener closed (or dropped) the connection: nothing more comes."""
    try:
        return await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        return True


async def test_past_the_cap_the_connection_idle_longest_makes_room(tmp_path: Path) -> None:
    """Before: idle connections up to the cap refused every newcomer, a probe's too, until
    the head deadline cut them."""
    async with open_http_mesh(tmp_path, limits=HttpLimits(max_connections=6)) as mesh:
        idle = [await connect(mesh, n) for n in range(6)]
        await asyncio.sleep(0.05)
        closing = {"Connection": "close"}
        assert (await mesh.http.get("/healthz", headers=closing)).status_code == 200
        assert await closed(idle[0][0])  # the oldest made room
        assert not any(reader.at_eof() for reader, _ in idle[1:])
        for _, writer in idle:
            writer.close()


async def test_one_peers_connections_are_capped(tmp_path: Path) -> None:
    """Before: one address could take every connection there was."""
    limits = HttpLimits(max_connections_per_peer=3, retry_after_s=7)
    async with open_http_mesh(tmp_path, limits=limits) as mesh:
        held = [await connect(mesh) for _ in range(3)]
        reader, writer = await connect(mesh)
        refused = await asyncio.wait_for(reader.read(), 5)
        assert refused.startswith(b"HTTP/1.1 503")
        assert b"retry-after: 7" in refused
        writer.close()
        other = [await connect(mesh, n) for n in range(3)]  # other addresses: let in
        assert not any(r.at_eof() for r, _ in other)
        for _, held_writer in held + other:
            held_writer.close()
        await asyncio.sleep(0.2)  # their places are given back
        assert (await mesh.get("/healthz")).status_code == 200


async def test_reads_are_shed_while_probes_and_webhooks_are_answered(tmp_path: Path) -> None:
    """Before: one budget for every route; held reads made ``/healthz`` and the webhook
    routes answer 503 too."""
    limits = HttpLimits(max_requests=3, retry_after_s=7)
    async with open_http_mesh(tmp_path, limits=limits) as mesh:
        await reads_shed_alone(mesh, limits)


async def reads_shed_alone(mesh: HttpMesh, limits: HttpLimits) -> None:
    gate = hold_reads(mesh)
    path = f"/v1/endpoints/{ACME}/tasks"
    held = [asyncio.create_task(mesh.get(path)) for _ in range(limits.max_requests)]
    await asyncio.sleep(0.3)  # all are in, waiting on the store
    assert not any(h.done() for h in held)

    shed = await asyncio.wait_for(mesh.get(path), 5)
    probe = await asyncio.wait_for(mesh.get("/healthz"), 5)
    hook = await asyncio.wait_for(mesh.http.post("/webhooks/github", content=b"{}"), 5)

    assert shed.status_code == 503
    assert shed.headers["retry-after"] == "7"
    assert shed.headers["x-content-type-options"] == "nosniff"
    assert shed.json()["error"]["code"] == "unavailable"
    assert "max_requests" in shed.json()["error"]["message"]
    assert probe.status_code == 200
    assert hook.status_code == 401  # answered (unsigned): the route has its own budget
    gate.set()
    assert {r.status_code for r in await asyncio.gather(*held)} == {200}
    assert (await mesh.get(path)).status_code == 200


async def test_one_peers_webhook_deliveries_are_paced(tmp_path: Path) -> None:
    """Before: one address could send deliveries as fast as the bridge answered them (a
    replayed flood took the event loop from the wire). Now a second's worth passes at
    once, each later one waits its turn (holding no slot), one that would wait over 5 s
    is answered 429 with Retry-After, and another address is not held meanwhile."""
    limits = HttpLimits(webhook_rate_per_peer=4, max_connections_per_peer=64, retry_after_s=7)
    loop = asyncio.get_running_loop()

    def client(url: str, peer: int) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(local_address=peer_address(peer))
        return httpx.AsyncClient(base_url=url, transport=transport, timeout=30)

    async def post(http: httpx.AsyncClient) -> tuple[int, float, str | None]:
        start = loop.time()
        answer = await http.post("/webhooks/github", content=b"{}")
        return answer.status_code, loop.time() - start, answer.headers.get("retry-after")

    async with (
        open_http_mesh(tmp_path, limits=limits) as paced,
        client(paced.url, 1) as one,
        client(paced.url, 2) as two,
    ):
        flood = asyncio.gather(*(post(one) for _ in range(30)))
        await asyncio.sleep(0.5)
        other = await post(two)  # another address: its own turn, at once
        answers = await flood

    assert other[0] == 401
    assert other[1] < 1.0
    refused = [a for a in answers if a[0] == 429]
    read = sorted(a[1] for a in answers if a[0] == 401)  # unsigned: read, then refused
    assert 1 <= len(refused) <= 6  # the 25th to the 30th would wait over 5 s
    assert {a[2] for a in refused} == {"7"}
    assert len(read) + len(refused) == 30
    assert read[3] < 1.0  # a second's worth at once
    assert 3.0 < read[-1] < 6.0  # the last read waited its turn


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
