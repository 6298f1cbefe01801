"""A tracker that refuses the connection is answered at once, named: nothing listens at
that address, and no retry within the request changes that (the next poll asks again).
Other transport failures are still retried. The error names the token's variable and the
repository it was asked for."""

from __future__ import annotations

import httpx
import pytest

from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError


def failing_with(cause: OSError, calls: list[str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        raise httpx.ConnectError("All connection attempts failed", request=request) from cause

    return httpx.MockTransport(handler)


def tracker(transport: httpx.MockTransport, slept: list[float]) -> TrackerHttp:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    client = httpx.AsyncClient(base_url="http://127.0.0.1:8765", transport=transport)
    return TrackerHttp(
        client,
        lambda response, attempt, now_s: None,
        max_retries=5,
        sleep=sleep,
        credential="GITHUB_TOKEN",
        source="acme/widgets",
    )


async def test_a_refused_connection_is_not_retried_and_is_named() -> None:
    calls: list[str] = []
    slept: list[float] = []
    http = tracker(failing_with(ConnectionRefusedError(111, "refused"), calls), slept)
    with pytest.raises(TrackerHttpError) as caught:
        await http.request("GET", "/repos/acme/widgets/issues")
    assert len(calls) == 1  # before: six attempts, backing off about 15 s in all
    assert slept == []
    assert caught.value.status is None
    assert caught.value.message == "connection refused at http://127.0.0.1:8765"
    assert (caught.value.credential, caught.value.source) == ("GITHUB_TOKEN", "acme/widgets")


async def test_another_transport_failure_is_still_retried() -> None:
    calls: list[str] = []
    slept: list[float] = []
    http = tracker(failing_with(OSError("network is unreachable"), calls), slept)
    with pytest.raises(TrackerHttpError) as caught:
        await http.request("GET", "/repos/acme/widgets/issues")
    assert len(calls) == 6
    assert len(slept) == 5
    assert caught.value.message.startswith("ConnectError: ")
