"""Oversize requests flooding the broker cost the bridge nothing a caller notices.

Every principal holds ``describe``, so anyone on the mesh can publish describes padded to
the broker's payload limit. With the embedded broker at nats-server's default limit (1 MB),
a flood of them reached the bridge faster than it could read them: the broker's outbound
buffer to the bridge passed its slow-consumer limit, the broker cut the bridge off, and
requests in flight to it were lost. Now the embedded broker's payload limit sits at the
contract's largest valid request, so the broker refuses each oversize body at its sender;
a body over that bound that does reach the bridge (an existing broker left at its default)
is refused ``bad-request`` before it is decoded; and each subscription's backlog is bounded.

The flooders speak the NATS protocol over raw sockets, in their own processes, as a hostile
client would: they ignore the limit the broker announces, and connect again each time the
broker closes them for a payload violation.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.service.commands import DEFAULT_PAGE_CEILING
from cotal_tasks.core.ceiling import max_payload_bytes, max_request_bytes
from tests.conftest import Clock, seat
from tests.support.bridge import ENDPOINT, SPACE, TEST_HTTP, bridge_on, client
from tests.support.cotal import TestCaller, nonce
from tests.support.flood import flood
from tests.support.loopback import loopback_mesh

pytestmark = pytest.mark.broker

PAD = 1_000_000  # a padded describe: just under nats-server's default 1 MB payload limit
FLOOD = 1000  # per flooder
FLOODERS = 2


def _padded_describe(caller: TestCaller) -> bytes:
    body = caller.envelope("describe", args=None, digests=False)
    body["pad"] = "x" * PAD
    return json.dumps(body).encode()


async def test_a_flood_of_padded_describes_costs_no_caller_a_request(tmp_path: Path) -> None:
    config = BridgeConfig(
        space=SPACE,
        http=TEST_HTTP,
        data_dir=tmp_path / "data",
        endpoints=(EndpointConfig(name=ENDPOINT),),
    )  # no nats_url: the bridge starts its embedded broker
    async with bridge_on(config) as bridge:
        port = int(bridge.url.rsplit(":", 1)[1])
        nc = await client(bridge.url)
        try:
            flooder = TestCaller(nc, SPACE, ENDPOINT, seat("flooder"))
            caller = TestCaller(nc, SPACE, ENDPOINT, seat("worker"))
            created = await caller.ok("create-task", {"title": "kept"})
            padded, prefix = _padded_describe(flooder), flooder.subject("describe", "")
            floods = [
                asyncio.create_task(flood(port, prefix, padded, FLOOD)) for _ in range(FLOODERS)
            ]
            lost = answered = 0
            while not all(f.done() for f in floods) or answered < 20:
                reply = await caller.call("get-task", {"taskId": created["taskId"]})
                answered += 1
                lost += not reply["ok"]
            await asyncio.gather(*floods)
            assert lost == 0
            assert bridge.nc.stats["reconnects"] == 0
            assert bridge.nc.max_payload == max_payload_bytes(DEFAULT_PAGE_CEILING) < PAD
        finally:
            await nc.close()
    log = (tmp_path / "data" / "nats" / "nats-server.log").read_text(encoding="utf-8")
    assert "maximum payload exceeded" in log  # the flood was refused at the broker
    assert "Slow Consumer" not in log


async def test_an_oversize_body_is_refused_before_it_is_decoded(clock: Clock) -> None:
    """Where the broker lets it through (its default 1 MB limit), the bridge refuses it
    unread: the reply does not even echo the body's id."""
    async with loopback_mesh(clock) as mesh:
        caller = mesh.caller("worker")
        body = caller.envelope(
            "update-task", args={"taskId": "t", "note": "x" * 200_000}, request_id="kept-id"
        )
        request_nonce = nonce()
        got = await caller.exchange(
            caller.subject("update-task", request_nonce, mode="self"),
            json.dumps(body).encode(),
            request_nonce,
        )
        assert got is not None
        reply = got[1]
        assert reply["id"] == "invalid"
        error = reply["error"]
        assert (error["code"], error["outcome"]) == ("bad-request", "not-executed")
        assert f"{max_request_bytes():,} bytes" in error["message"]
        assert await mesh.store.change_seq() == 0  # nothing written
