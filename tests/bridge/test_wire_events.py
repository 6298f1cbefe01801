"""``board-changed`` is a wake, not a feed: writes committed together wake a reader once,
with the newest changeSeq; no write is left without a wake after it, a stop included."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cotal_tasks.client import TasksClient
from tests.bridge.wire_support import PREFIX, watching
from tests.conformance.conftest import open_mesh
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE


async def test_writes_committed_together_wake_readers_once_with_the_newest_seq(
    tmp_path: Path,
) -> None:
    async with open_mesh(tmp_path) as mesh:
        operator = TasksClient(mesh.nc, SPACE, ENDPOINT, seat("operator"))
        await operator.describe()
        async with watching(mesh, f"{PREFIX}.epe.>") as events:
            made = await asyncio.gather(*(operator.create_task(f"task {n}") for n in range(20)))
            newest = (await operator.list_tasks()).changeSeq
            await asyncio.sleep(0.5)
        seqs = [json.loads(e.data)["data"]["changeSeq"] for e in events]
        assert len(made) == 20
        assert seqs, "no wake at all"
        assert len(seqs) < 20, seqs  # one per turn of the loop, not one per write
        assert max(seqs) == newest


async def test_the_last_writes_are_announced_when_the_server_stops(tmp_path: Path) -> None:
    async with open_mesh(tmp_path) as mesh:
        server = mesh.bridge.servers[0]
        async with watching(mesh, f"{PREFIX}.epe.>") as events:
            await server.publish_board_changed(41, 1)
            await server.publish_board_changed(42, 2)
            await server.stop()  # before the event's turn came
            await asyncio.sleep(0.3)
        assert [json.loads(e.data)["data"] for e in events] == [{"changeSeq": 42, "observedAt": 2}]
