"""The shared tracker HTTP layer against a hostile peer: a real loopback server that
answers a huge page, drips its answer a byte at a time, or names a next page forever.
Each ends in a ``TrackerHttpError`` within its bound, with the key to change."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from cotal_tasks.providers.github.client import github_http_client, github_retry
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted import assemble
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError

Handler = Callable[[str, asyncio.StreamWriter], Awaitable[None]]


def never_retry(response: httpx.Response, attempt: int, now_s: float) -> float | None:
    return None


@contextlib.asynccontextmanager
async def peer(handle: Handler) -> AsyncIterator[str]:
    """A loopback HTTP/1.1 server answering each request with ``handle(target, writer)``."""

    handlers: set[asyncio.Task[None]] = set()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                target = line.split()[1].decode()
                while (await reader.readline()) not in (b"\r\n", b""):
                    pass
                await handle(target, writer)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(answer(reader, writer))
        handlers.add(task)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await asyncio.sleep(0.05)  # the handlers close their sockets


def tracker_http(url: str, **bounds: float) -> TrackerHttp:
    client = httpx.AsyncClient(base_url=url, timeout=5.0)
    return TrackerHttp(client, never_retry, max_retries=0, **bounds)  # type: ignore[arg-type]


async def test_a_page_over_the_size_cap_is_refused_as_it_arrives() -> None:
    """Before: a 400 MiB list page was held whole (1.1 GiB every poll)."""
    sent = 0

    async def huge(target: str, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
        while sent < 256 << 20:
            writer.write(chunk)
            await writer.drain()
            sent += 1 << 16

    async with peer(huge) as url:
        http = tracker_http(url, max_response_bytes=1 << 20)
        with pytest.raises(TrackerHttpError) as caught:
            await http.request("GET", "/repos/o/r/issues")
        await http.client.aclose()
    assert "max_response_bytes" in caught.value.message
    assert sent < 32 << 20  # it stopped reading: the peer could not push 256 MiB


async def test_a_dripped_answer_ends_at_the_deadline() -> None:
    """Before: a body dripped a byte every 5 s hung the sync until the peer went away
    (each byte arrives well within the client's 5 s read timeout)."""

    async def drip(target: str, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(1000):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.5)

    loop = asyncio.get_running_loop()
    async with peer(drip) as url:
        http = tracker_http(url, deadline_s=1.5)
        started = loop.time()
        with pytest.raises(TrackerHttpError) as caught:
            await http.request("GET", "/repos/o/r/issues")
        took = loop.time() - started
        await http.client.aclose()
    assert took < 4
    assert caught.value.status is None
    assert "request_timeout_s" in str(caught.value)


async def test_a_configured_request_timeout_bounds_the_whole_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: ``request_timeout_s = 1`` bounded each read only, and the attempt had its
    own 120 s deadline: a listing dripped a byte every 0.3 s was still being read long
    after the second the operator set. Now the endpoint's one knob bounds the attempt."""

    async def drip(target: str, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        writer.write(b"Content-Length: 100\r\n\r\n[")
        for _ in range(99):
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.write(b" ")

    monkeypatch.setenv("COTAL_TASKS_TEST_DRIP_TOKEN", "t0ken-for-a-loopback-peer")
    loop = asyncio.get_running_loop()
    async with peer(drip) as url:
        config = GitHubConfig(
            repository="o/r",
            api_url=url,
            token_env="COTAL_TASKS_TEST_DRIP_TOKEN",
            request_timeout_s=1,
            max_retries=0,
        )
        http = assemble.tracker_http(config, "GitHub", github_http_client, github_retry)
        started = loop.time()
        with pytest.raises(TrackerHttpError) as caught:
            await asyncio.wait_for(http.request("GET", "/repos/o/r/issues"), 10)
        took = loop.time() - started
        await http.client.aclose()
    assert took < 2.5, took
    assert caught.value.status is None
    assert "within 1 s (request_timeout_s" in str(caught.value)


async def test_a_link_pagination_stops_at_the_page_cap() -> None:
    """Before: a ``Link: rel="next"`` on every page was followed forever."""
    served: list[int] = []

    async def endless(target: str, writer: asyncio.StreamWriter) -> None:
        match = re.search(r"page=(\d+)", target)
        page = int(match.group(1)) if match else 1
        served.append(page)
        base = writer.get_extra_info("sockname")
        following = f"http://127.0.0.1:{base[1]}/repos/o/r/issues?page={page + 1}"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            b'Link: <%s>; rel="next"\r\n\r\n[]' % following.encode()
        )
        await writer.drain()

    async with peer(endless) as url:
        http = tracker_http(url, max_pages=5)

        async def walk() -> None:  # how every walk follows a Link listing
            next_url: str | None = "/repos/o/r/issues"
            while next_url is not None:
                response = await http.request("GET", next_url)
                next_url = response.links.get("next", {}).get("url")

        with pytest.raises(TrackerHttpError) as caught:
            await walk()
        await http.client.aclose()
    assert served == [1, 2, 3, 4, 5]
    assert "max_pages" in caught.value.message
