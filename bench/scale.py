"""A board of a million tasks: start-up time, the bridge's memory, page cost by depth.

The board file is built once by bulk insert (below the port: set-up, not measurement)
and kept under the cache folder (``.bench-cache/``, ignored by git) for the next run.
Measured: the time from spawning ``cotal-tasks serve`` on it to its first ``describe``
answer; the bridge process's resident memory after a burst of reads over the wire
(target <= 200 MB); and the cost of a ``list-tasks`` page of 100 at the end of the board
over its cost at the start (target <= 1.5), through the service and over the wire.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from bench import wire
from bench.board import OPERATOR, seed_sqlite, service_on
from bench.figures import Table
from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.bridge.service.paging import encode_cursor
from cotal_tasks.providers.board import BoardStore

RSS_LIMIT_MB = 200


async def board_file(cache: Path, tasks: int) -> tuple[Path, float | None]:
    """The cached board of ``tasks`` tasks, and how long building it took (None: cached)."""
    path = cache / f"board-{tasks}.db"
    building = cache / f"board-{tasks}.building.db"
    if await asyncio.to_thread(_cached, path, building):
        return path, None
    started = time.perf_counter()
    store = await BoardStore.open(f"sqlite:///{building}")  # creates the schema
    await store.close()
    seed_sqlite(building, tasks)
    building.rename(path)  # only a finished board is ever reused
    return path, time.perf_counter() - started


def _cached(path: Path, building: Path) -> bool:
    """Whether the board is built; if not, clear what an interrupted build left."""
    if path.exists():
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in path.parent.glob(building.name + "*"):
        leftover.unlink()
    return False


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc status")


async def main(cache: Path, tasks: int, rounds: int) -> None:
    path, built_s = await board_file(cache, tasks)
    how = "cached" if built_s is None else f"built in {built_s:.1f} s"
    table = Table(f"A board of {tasks:,} tasks (SQLite, {how})")
    first = {"limit": 100}
    last = {"limit": 100, "cursor": encode_cursor(tasks - 100, "list-tasks", None)}

    started = time.perf_counter()
    store = await BoardStore.open(f"sqlite:///{path}")
    opened_s = time.perf_counter() - started
    try:
        service = service_on(store)

        def page(args: dict[str, Any]) -> Any:
            return lambda _i: service.handle(Call("list-tasks", OPERATOR, "l", args))

        pages = await wire.paired({"start": page(first), "end": page(last)}, 1, 500, rounds)
        at_start, at_end = pages["start"], pages["end"]
    finally:
        await store.close()
    table.note("opening the store (migrations checked)", f"{opened_s * 1000:,.0f} ms")
    table.limit("list-tasks page of 100 at the start, in process", at_start)
    table.cost_at_most("  at the end: cost x the start", at_end, at_start, 1.5)

    database = f"sqlite:///{path.resolve()}"
    async with wire.broker() as (url, nc, folder), wire.bridge(url, nc, folder, database) as served:
        table.note("bridge start-up: spawn to first describe answer", f"{served.start_s:.2f} s")
        callers = await wire.callers_of(nc, served)
        ids = [f"t-{n:07d}" for n in random.Random(7).sample(range(tasks), 20_000)]

        def get(i: int) -> Awaitable[object]:
            return callers[i % wire.CALLERS].call("get-task", {"taskId": ids[i % len(ids)]})

        def wire_page(args: dict[str, Any]) -> Any:
            return lambda i: callers[i % wire.CALLERS].call("list-tasks", args)

        reads = await wire.paired({"get": get}, wire.CALLERS, len(ids), 1)
        got = reads["get"]
        table.note("get-task over the wire, 50 callers (fills the read cache)", f"{got}")
        pages = await wire.paired(
            {"start": wire_page(first), "end": wire_page(last)}, wire.CALLERS, 500, rounds
        )
        table.limit("list-tasks page of 100 at the start, over the wire", pages["start"])
        table.cost_at_most("  at the end: cost x the start", pages["end"], pages["start"], 1.5)
        rss = rss_mb(served.process.pid)
        table.note(
            "bridge resident memory after the reads",
            f"{rss:,.0f} MB",
            f"<= {RSS_LIMIT_MB} MB",
            rss <= RSS_LIMIT_MB,
        )
    table.print()
