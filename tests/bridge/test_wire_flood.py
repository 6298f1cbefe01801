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
import sys
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.core.ceiling import max_request_bytes
from tests.conftest import Clock, seat
from tests.support.bridge import ENDPOINT, SPACE, TEST_HTTP, bridge_on, client
from tests.support.cotal import TestCaller, nonce
from tests.support.loopback import loopback_mesh

pytestmark = pytest.mark.broker

PAD = 1_000_000  # a padded describe: just under nats-server's default 1 MB payload limit
FLOOD = 1000  # per flooder
FLOODERS = 2

# A flooder: the body on stdin, published FLOOD times to the subject prefix (a fresh nonce
# each time) over a raw socket that ignores the announced limit; connects again when cut.
FLOODER = (
    "import secrets, socket, sys\n"
    "host, port, prefix, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])\n"
    "data = sys.stdin.buffer.read()\n"
    "sent = 0\n"
    "while sent < count:\n"
    "    sock = socket.create_connection((host, port))\n"
    "    try:\n"
    "        sock.recv(4096)\n"
    '        sock.sendall(b\'CONNECT {"verbose":false,"pedantic":false}\\r\\n\')\n'
    "        while sent < count:\n"
    "            subject = (prefix + secrets.token_urlsafe(18)).encode()\n"
    "            head = b'PUB ' + subject + b' ' + str(len(data)).encode() + b'\\r\\n'\n"
    "            sock.sendall(head + data + b'\\r\\n')\n"
    "            sent += 1\n"
    "    except OSError:\n"
    "        sent += 1\n"
    "    finally:\n"
    "        sock.close()\n"
)


async def _flood(port: int, caller: TestCaller) -> None:
    body = caller.envelope("describe", args=None, digests=False)
    body["pad"] = "x" * PAD
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FLOODER,
        "127.0.0.1",
        str(port),
        caller.subject("describe", ""),
        str(FLOOD),
        stdin=asyncio.subprocess.PIPE,
    )
    await process.communicate(json.dumps(body).encode())
    assert process.returncode == 0


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
            floods = [asyncio.create_task(_flood(port, flooder)) for _ in range(FLOODERS)]
            lost = answered = 0
            while not all(f.done() for f in floods) or answered < 20:
                reply = await caller.call("get-task", {"taskId": created["taskId"]})
                answered += 1
                lost += not reply["ok"]
            await asyncio.gather(*floods)
            assert lost == 0
            assert bridge.nc.stats["reconnects"] == 0
            assert bridge.nc.max_payload == max_request_bytes()
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
