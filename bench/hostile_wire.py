"""The wire while oversize requests flood the broker: the get-task rate while raw-socket
publishers push padded 1 MB describes at the bridge's subjects, as a share of the same
run's rate without them, and how many times the broker cut the bridge off as a slow
consumer (target 0).

The bridge runs in its own process (``cotal-tasks serve``) on a broker configured as the
embedded one is (``max_payload`` at the larger of the contract's largest valid request and
the largest reply at the default page ceiling, ``core.ceiling``), so each oversize publish
is refused at its sender; the flooders ignore the limit the broker announces and connect
again each time it closes them, at the rate of the reported attack (2,000 padded describes
in 7 s); flooding back to back instead only measures how much of the machine's CPU the
flooders take.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench.figures import Table
from bench.wire import CALLERS, ENDPOINT, TOKEN, bridge, broker, get_task_rate
from cotal_tasks.bridge.service.commands import DEFAULT_PAGE_CEILING
from cotal_tasks.core.ceiling import max_payload_bytes
from tests.support.flood import flood

FLOODERS = 2
PAD = 1_000_000
RATE = 150  # each flooder's describes a second: the reported attack, 2,000 in 7 s
MANY = 2000


def _count(log: Path, what: str) -> int:
    return log.read_text(encoding="utf-8", errors="replace").count(what)


async def main(rounds: int = 5, tasks: int = 200) -> None:
    async with broker(max_payload=max_payload_bytes(DEFAULT_PAGE_CEILING)) as (url, nc, folder):
        log = folder / "nats" / "nats-server.log"
        async with bridge(url, nc, folder) as served:
            callers, measured = await get_task_rate(nc, served, rounds, tasks, MANY)
            seat = callers[0].seat
            body = json.dumps(
                {
                    "v": 1,
                    "id": "flood",
                    "op": {"endpoint": ENDPOINT, "command": "describe"},
                    "class": "ephemeral",
                    "replyExpected": True,
                    "deadlineMs": 10_000,
                    "from": {"id": seat.principal, "name": "flooder"},
                    "pad": "x" * PAD,
                }
            ).encode()
            prefix = callers[0].rail.request(TOKEN, "describe", "")
            port = int(url.rsplit(":", 1)[1])

            quiet = await measured()
            refused_before = _count(log, "maximum payload exceeded")
            floods = [
                asyncio.ensure_future(flood(port, prefix, body, rate=RATE)) for _ in range(FLOODERS)
            ]
            await asyncio.sleep(1.0)  # the flood is on before the rounds start
            try:
                flooded = await measured()
            finally:
                for task in floods:
                    task.cancel()
                await asyncio.gather(*floods, return_exceptions=True)
            refused = _count(log, "maximum payload exceeded") - refused_before
            slow = _count(log, "Slow Consumer")
        table = Table(
            f"The wire while oversize describes flood the broker (get-task, {CALLERS} callers; "
            f"{FLOODERS} raw-socket flooders, {FLOODERS * RATE} describes of {PAD:,} B a second)"
        )
        table.limit("get-task, no flood", quiet)
        table.at_least("get-task under the flood", flooded, quiet, 0.8)
        table.note("slow-consumer disconnects (the broker's log)", str(slow), "0", slow == 0)
        table.note("oversize publishes refused by the broker", f"{refused:,}")
        table.print()
