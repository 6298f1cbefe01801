"""Writes over the Cotal wire, beside the same disk's (or server's) sequential commits.

The bridge (``cotal-tasks serve``) and the broker run in their own processes; the bench's
callers send ``claim-task`` then ``update-task`` (status done, a note) on tasks of their
own, each pair on a task nobody else touches, every one acknowledged only after its
transaction committed. The limit, measured in the same run between the wire rounds:

- SQLite: Python's ``sqlite3`` committing one-row ``UPDATE`` transactions in sequence on a
  file in the same folder as the board, with the board's settings (WAL,
  ``synchronous=FULL``): what one durable commit at a time costs on this disk;
- PostgreSQL: asyncpg's own one-row ``UPDATE`` commits in sequence on the same database.

Beside the rates, the CPU time each process spent per write (from ``/proc``) over the
50-caller rounds: the caller (this process), the broker and the bridge.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from nats.aio.client import Client as NATS

from bench.board import asyncpg_dsn, fresh_postgres, seed_postgres, seed_sqlite
from bench.figures import Rate, Table
from bench.wire import CALLERS, FastCaller, bridge, broker, callers_of
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.board.sqlite import connect

ONE_PAIRS = 150  # claim + update pairs in a round of 1 caller
MANY_PAIRS = 1_000  # and of 50 callers (2,000 writes)
RAW_COMMITS = 300


@dataclass
class Cpu:
    """CPU seconds (user and system) of the processes of one measurement."""

    pids: dict[str, int]

    def now(self) -> dict[str, float]:
        return {name: _cpu_s(pid) for name, pid in self.pids.items()}


def _cpu_s(pid: int) -> float:
    if pid == os.getpid():
        times = os.times()
        return times.user + times.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class WirePairs:
    """Claim then finish distinct tasks over the wire; bodies built outside the timing."""

    def __init__(self, callers: list[FastCaller], ids: list[str]) -> None:
        self.callers = callers
        self.ids = ids
        self.next = 0  # tasks from here on are unclaimed

    async def rate(self, count: int, pairs: int) -> float:
        """Writes per second of ``pairs`` pairs from ``count`` callers at once."""
        per = max(1, pairs // count)
        first, self.next = self.next, self.next + per * count
        bodies = []
        for c in range(count):
            caller = self.callers[c]
            own = []
            for j in range(per):
                args = {"taskId": self.ids[first + c * per + j]}
                update = {**args, "status": "done", "note": "Finished in the bench."}
                own.append((caller.body("claim-task", args), caller.body("update-task", update)))
            bodies.append(own)

        async def run(c: int) -> None:
            caller = self.callers[c]
            for claim, update in bodies[c]:
                await caller.send("claim-task", claim, mode="self")
                await caller.send("update-task", update, mode="self")

        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(run(c) for c in range(count))), 300)
        return 2 * per * count / (time.perf_counter() - started)


async def alternate(
    limit: Callable[[], Awaitable[float]],
    measured: Callable[[], Awaitable[float]],
    rounds: int,
    cpu: Cpu | None = None,
) -> tuple[Rate, Rate, dict[str, float]]:
    """``limit`` and ``measured`` in turn, after one warm-up of each; with ``cpu``, the
    CPU seconds each process spent over the measured rounds (and their write count)."""
    await limit()
    await measured()
    limits: list[float] = []
    rates: list[float] = []
    spent = dict.fromkeys(cpu.pids if cpu else (), 0.0)
    for _ in range(rounds):
        limits.append(await limit())
        before = cpu.now() if cpu else {}
        started = time.perf_counter()
        rates.append(await measured())
        if cpu is not None:
            elapsed = time.perf_counter() - started
            spent["writes"] = spent.get("writes", 0.0) + rates[-1] * elapsed
            for name, value in cpu.now().items():
                spent[name] += value - before[name]
    return Rate(tuple(limits)), Rate(tuple(rates)), spent


def cpu_rows(table: Table, spent: dict[str, float]) -> None:
    writes = spent.pop("writes", 0.0)
    if not writes:
        return
    cells = ", ".join(f"{name} {1e6 * s / writes:,.0f} µs" for name, s in spent.items())
    table.note(f"  CPU per write at {CALLERS} callers", cells)


def sqlite_limit(path: Path) -> Callable[[], Awaitable[float]]:
    """Sequential durable one-row commits on a file of the board's settings, per second."""
    conn = connect(str(path))
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, at INTEGER)")
    conn.execute("INSERT OR IGNORE INTO t VALUES (1, 0)")
    counter = 0

    def commits() -> float:
        nonlocal counter
        started = time.perf_counter()
        for _ in range(RAW_COMMITS):
            counter += 1
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE t SET at = ? WHERE id = 1", (counter,))
            conn.execute("COMMIT")
        return RAW_COMMITS / (time.perf_counter() - started)

    async def measure() -> float:
        return commits()

    return measure


def _tasks_needed(rounds: int) -> int:
    return (rounds + 1) * (ONE_PAIRS + MANY_PAIRS) + CALLERS


async def _measure(
    title: str,
    database: str,
    folder: Path,
    url: str,
    nc: NATS,
    ids: list[str],
    limit: Callable[[], Awaitable[float]],
    limit_name: str,
    rounds: int,
    broker_pid: int | None,
) -> None:
    async with bridge(url, nc, folder, database) as served:
        callers = await callers_of(nc, served)
        pairs = WirePairs(callers, ids)
        pids = {"caller": os.getpid(), "bridge": served.process.pid}
        if broker_pid is not None:
            pids["broker"] = broker_pid
        table = Table(title)
        raw_one, one, _ = await alternate(limit, lambda: pairs.rate(1, ONE_PAIRS), rounds)
        raw_many, many, spent = await alternate(
            limit, lambda: pairs.rate(CALLERS, MANY_PAIRS), rounds, Cpu(pids)
        )
        raw = Rate(raw_one.rounds + raw_many.rounds)
        table.limit(limit_name, raw)
        # A lone caller waits for every hop and its own fsync: no target, the latency's
        # share of the limit (docs/architecture.md, where the time goes).
        table.info("claim + update over the wire, 1 caller (writes/s)", one, raw, target="none")
        target = 0.3 if database.startswith("sqlite") else 0.5
        table.at_least(
            f"claim + update over the wire, {CALLERS} callers (writes/s)", many, raw, target
        )
        cpu_rows(table, spent)
        table.print()


def _broker_pid(folder: Path) -> int | None:
    try:
        return int((folder / "nats" / "nats-server.pid").read_text().strip())
    except (OSError, ValueError):
        return None


async def main(rounds: int = 5, postgres: str | None = None) -> None:
    async with broker() as (url, nc, folder):
        board = folder / "board.db"
        store = await BoardStore.open(f"sqlite:///{board}")  # the schema, then the seed
        await store.close()
        ids = seed_sqlite(board, _tasks_needed(rounds))
        await _measure(
            "Writes over the wire, SQLite board (WAL, synchronous=FULL)",
            f"sqlite:///{board}",
            folder,
            url,
            nc,
            ids,
            sqlite_limit(folder / "sequential.db"),
            "durable one-row UPDATE commit (sqlite3, sequential, same disk)",
            rounds,
            _broker_pid(folder),
        )
        if postgres is None:
            print("\nWrites over the wire, PostgreSQL: skipped (set COTAL_TASKS_BENCH_POSTGRES)")
            return
        async with fresh_postgres(postgres) as pg_url:
            store = await BoardStore.open(pg_url)
            await store.close()
            ids = await seed_postgres(pg_url, _tasks_needed(rounds))
            raw = await asyncpg.connect(asyncpg_dsn(pg_url))
            try:
                await _measure(
                    "Writes over the wire, PostgreSQL board",
                    pg_url,
                    folder,
                    url,
                    nc,
                    ids,
                    _postgres_limit(raw, ids[-CALLERS:]),
                    "one-row UPDATE commit (asyncpg, sequential)",
                    rounds,
                    _broker_pid(folder),
                )
            finally:
                await raw.close()


def _postgres_limit(raw: asyncpg.Connection, spare: list[str]) -> Callable[[], Awaitable[float]]:
    """Sequential autocommitted one-row updates (of tasks no caller writes), per second."""
    counter = 0

    async def measure() -> float:
        nonlocal counter
        started = time.perf_counter()
        for _ in range(RAW_COMMITS):
            counter += 1
            await raw.execute(
                "UPDATE ct_tasks SET updated_at = $1 WHERE task_id = $2",
                counter,
                spare[counter % len(spare)],
            )
        return RAW_COMMITS / (time.perf_counter() - started)

    return measure
