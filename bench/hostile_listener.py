"""The listener's probes and webhooks under slow and idle peers: the share of ``/healthz``
and signed webhook deliveries answered, and their p99 latency, while 64 slow readers and
300 idle sockets press on the listener, beside the same run's figures without them.

The bridge runs in its own process (``cotal-tasks serve``, the listener's default bounds)
with a board and a GitHub endpoint (the fake GitHub on loopback, its webhook secret set).
Another process presses (``tests.support.peers``): 64 slow readers, each from its own
loopback address, with a 4 KiB receive buffer, 512 ``GET /v1/openapi.json`` pipelined and
nothing ever read, and 300 idle sockets from 100 other addresses; each socket the
listener lets go of (a slow reader past the write deadline, an idle one past the head
deadline or dropped to make room) is opened again at once. The measurement starts once
most slow readers' answers are backed up. Each probe is asked on a connection of its own,
as an orchestrator's probe and GitHub's deliveries are: ``/healthz`` then a signed
``issues`` delivery, one after the other; answered means 200 and 202 within 10 s.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from bench.figures import Seconds, Table
from bench.hostile import REPO, SECRET, hooked_bridge
from bench.wire import broker
from cotal_tasks.bridge.process.broker import free_port
from tests.support.fake_github import (
    FakeGitHub,
    issues_payload,
    serve_fake_github,
    signed_webhook,
)

SLOW_READERS, IDLE = 64, 300
PAIRS = 50  # a /healthz and a delivery, per round
TIMEOUT_S = 10.0
TARGET = 0.99

# The presser, in its own process so the bench's loop measures the bridge alone.
PRESSER = (
    "import asyncio, sys\n"
    "from tests.support.peers import hostile_peers\n"
    "async def main(port, slow, idle):\n"
    "    with hostile_peers('127.0.0.1', port) as peers:\n"
    "        await peers.press(slow, idle, '/v1/openapi.json', lambda: print('pressing', "
    "flush=True))\n"
    "asyncio.run(main(*map(int, sys.argv[1:4])))\n"
)


@dataclass
class Probed:
    """Rounds of probes: how many were asked and answered, and each round's p99."""

    asked: int
    answered: int
    p99: Seconds

    @property
    def share(self) -> float:
        return self.answered / self.asked

    def __str__(self) -> str:
        return f"{self.share:.3f} ({self.answered:,} of {self.asked:,})"


async def probes(base: str, fake: FakeGitHub, rounds: int) -> Probed:
    """``rounds`` rounds of ``PAIRS`` probe pairs, each request on a fresh connection."""
    asked = answered = 0
    p99s = []
    closing = {"Connection": "close"}
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S) as http:
        for _ in range(rounds):
            took = []
            for _ in range(PAIRS):
                payload = issues_payload(fake, "edited", REPO, 1)
                body, headers = signed_webhook(SECRET, "issues", payload)
                for status, request in (
                    (200, http.build_request("GET", "/healthz", headers=closing)),
                    (202, http.build_request(
                        "POST", "/webhooks/github", content=body, headers={**headers, **closing}
                    )),
                ):  # fmt: skip
                    started = time.perf_counter()
                    try:
                        ok = (await http.send(request)).status_code == status
                    except httpx.HTTPError:
                        ok = False
                    took.append(time.perf_counter() - started if ok else TIMEOUT_S)
                    asked += 1
                    answered += ok
            p99s.append(statistics.quantiles(took, n=100)[98])
    return Probed(asked, answered, Seconds(tuple(p99s)))


@asynccontextmanager
async def pressing(port: int) -> AsyncIterator[None]:
    """The presser on ``port`` until the block ends, from the moment it presses."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PRESSER,
        str(port),
        str(SLOW_READERS),
        str(IDLE),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        said = await asyncio.wait_for(process.stdout.readline(), 180)
        assert said == b"pressing\n", said
        yield
    finally:
        process.terminate()
        await process.wait()


async def main(rounds: int = 5) -> None:
    fake = FakeGitHub()
    for k in range(1, 4):
        fake.add_issue(REPO, f"Issue {k}")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with (
        serve_fake_github(fake) as api_url,
        broker() as (url, nc, folder),
        hooked_bridge(url, nc, folder, api_url, fake.token, port),
    ):
        await probes(base, fake, 1)  # warm: the first sync is in, the routes loaded
        quiet = await probes(base, fake, rounds)
        async with pressing(port):
            pressed = await probes(base, fake, rounds)
    table = Table(
        f"The listener's probes and webhooks under {SLOW_READERS} slow readers and {IDLE} "
        "idle sockets (bridge in its own process, default bounds)"
    )
    table.note("/healthz and signed webhooks answered, no load", str(quiet))
    table.note(
        "answered under the slow readers and idle sockets",
        str(pressed),
        f">= {TARGET}",
        pressed.share >= TARGET,
    )
    table.limit_seconds("p99 latency of one probe, no load", quiet.p99)
    table.seconds_beside("p99 latency of one probe under the load", pressed.p99, quiet.p99)
    table.print()
