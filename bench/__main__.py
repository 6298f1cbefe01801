"""``make bench``: board and command-service throughput, as medians and ratios.

Every figure is the median of several rounds, reported beside a baseline measured in
the same run on the same database: the raw SQL statement the store issues, through
the same async driver, without the service and contract layers. Ratios say what the
contract costs on top of the database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, text, update

from bench import github, gitlab, wire
from cotal_tasks.bridge.service import Call, CommandService, ServiceSettings
from cotal_tasks.core import CreateTaskInput, Seat, create_task
from cotal_tasks.providers.board import BoardStore, schema

NOW = 1_780_000_000_000
OPERATOR = Seat("local", "operator", "0" * 26)


def seat(n: int) -> Seat:
    return Seat("local", f"s{n}", f"{n:026d}")


async def seed(store: BoardStore, count: int) -> list[str]:
    """Insert ``count`` valid open tasks in bulk (one transaction per 5,000 rows)."""
    ids = [f"t-{n:07d}" for n in range(count)]
    engine = store._engine  # the bench seeds below the port on purpose: setup, not measurement
    batch: list[dict[str, Any]] = []
    for n, task_id in enumerate(ids):
        task = create_task(
            CreateTaskInput(title=f"Benchmark task {n}", brief="Seeded for make bench."),
            task_id=task_id,
            space="bench",
            now=NOW + n,
        )
        batch.append(
            {
                "task_id": task_id,
                "status": task.status,
                "revision": 1,
                "body": json.dumps(task.to_json()),
                "summary": json.dumps(task.summary().to_json()),
                "created_at": task.createdAt,
                "updated_at": task.updatedAt,
            }
        )
        if len(batch) == 5000 or n == count - 1:
            async with engine.begin() as conn:
                await conn.execute(insert(schema.tasks), batch)
            batch = []
    async with engine.begin() as conn:
        await conn.execute(
            update(schema.meta).where(schema.meta.c.key == schema.CHANGE_SEQ).values(value=count)
        )
        if engine.dialect.name == "sqlite":
            await conn.execute(text("ANALYZE"))
    return ids


async def rate(op: Callable[[int], Awaitable[object]], ops: int, rounds: int) -> float:
    """Median operations per second over ``rounds`` rounds of ``ops`` calls."""
    results: list[float] = []
    counter = 0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(ops):
            await op(counter)
            counter += 1
        results.append(ops / (time.perf_counter() - start))
    return statistics.median(results)


async def median_seconds(op: Callable[[], Awaitable[object]], rounds: int) -> float:
    samples: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        await op()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def line(name: str, value: float, unit: str, baseline: float | None = None) -> str:
    """One figure; with a baseline rate, also its cost per operation as a multiple of it."""
    ratio = f"   cost x{baseline / value:5.2f} of the baseline" if baseline else ""
    return f"  {name:<48} {value:>9.1f} {unit}{ratio}"


async def bench_board(url: str, label: str, tasks: int, rounds: int) -> None:
    store = await BoardStore.open(url)
    clock = lambda: time.time_ns() // 1_000_000  # noqa: E731
    service = CommandService(store, ServiceSettings(space="bench", page_ceiling=100), clock)
    engine = store._engine
    t0 = time.perf_counter()
    ids = await seed(store, tasks)
    print(f"\n{label}: seeded {tasks:,} tasks in {time.perf_counter() - t0:.1f} s")

    async def raw_get(i: int) -> object:
        async with engine.connect() as conn:
            stmt = select(schema.tasks.c.body).where(schema.tasks.c.task_id == ids[i % tasks])
            return json.loads((await conn.execute(stmt)).scalar_one())

    async def svc_get(i: int) -> object:
        return await service.handle(Call("get-task", OPERATOR, "g", {"taskId": ids[i % tasks]}))

    async def raw_page_at(after: int) -> object:
        async with engine.connect() as conn:
            t = schema.tasks
            stmt = select(t.c.seq, t.c.summary).where(t.c.seq > after).order_by(t.c.seq).limit(101)
            return [json.loads(r.summary) for r in (await conn.execute(stmt)).all()]

    first_page = await service.handle(Call("list-tasks", OPERATOR, "l", {"limit": 100}))
    cursor_0 = None
    # Walk to position 99,000 (or as deep as the board goes) the way a client would.
    deep_target = max(0, tasks - 1000)
    cursor_deep = first_page.get("nextCursor")
    for _ in range(deep_target // 100 - 1):
        page = await service.handle(
            Call("list-tasks", OPERATOR, "l", {"limit": 100, "cursor": cursor_deep})
        )
        cursor_deep = page.get("nextCursor")

    def svc_page(cursor: str | None) -> Callable[[int], Awaitable[object]]:
        args: dict[str, Any] = (
            {"limit": 100} if cursor is None else {"limit": 100, "cursor": cursor}
        )
        return lambda _i: service.handle(Call("list-tasks", OPERATOR, "l", args))

    ops = 200
    raw_get_rate = await rate(raw_get, ops * 5, rounds)
    get_rate = await rate(svc_get, ops * 5, rounds)
    raw_page_rate = await rate(lambda _i: raw_page_at(0), ops, rounds)
    page0_rate = await rate(svc_page(cursor_0), ops, rounds)
    deep_rate = await rate(svc_page(cursor_deep), ops, rounds)
    print(line("get-task through the service", get_rate, "ops/s", raw_get_rate))
    print(line("raw SQL get by task id (baseline)", raw_get_rate, "ops/s"))
    print(line("list-tasks page of 100 at position 0", page0_rate, "ops/s", raw_page_rate))
    print(line(f"list-tasks page of 100 at position {deep_target:,}", deep_rate, "ops/s"))
    print(line("raw SQL keyset page of 100 (baseline)", raw_page_rate, "ops/s"))
    depth_ratio = page0_rate / deep_rate
    print(f"  page cost at {deep_target:,} / page cost at 0: {depth_ratio:.2f} (target <= 1.5)")

    # Writes: claim then update (done) distinct tasks; baseline is one raw UPDATE transaction.
    write_ops = 100

    async def claim(i: int) -> object:
        return await service.handle(
            Call("claim-task", seat(i), f"c{i}", {"taskId": ids[i]}, mode="self")
        )

    async def finish(i: int) -> object:
        return await service.handle(
            Call("update-task", seat(i), f"u{i}", {"taskId": ids[i], "status": "done"}, mode="self")
        )

    async def raw_write(i: int) -> object:
        async with engine.begin() as conn:
            t = schema.tasks
            return await conn.execute(
                update(t).where(t.c.task_id == ids[-1 - i]).values(updated_at=NOW + i)
            )

    raw_write_rate = await rate(raw_write, write_ops, rounds)
    claim_rate = await rate(claim, write_ops, rounds)
    update_rate = await rate(finish, write_ops, rounds)
    print(line("claim-task (read, rule, CAS commit)", claim_rate, "ops/s", raw_write_rate))
    print(line("update-task status done (id-idempotent)", update_rate, "ops/s", raw_write_rate))
    print(line("raw SQL one-row UPDATE transaction (baseline)", raw_write_rate, "ops/s"))
    await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--postgres", default=os.environ.get("COTAL_TASKS_BENCH_POSTGRES"))
    parser.add_argument("--only", choices=["board", "wire", "github", "gitlab"], default=None)
    parser.add_argument("--github-issues", type=int, default=10_000)
    parser.add_argument("--github-rounds", type=int, default=3)
    parser.add_argument("--gitlab-issues", type=int, default=10_000)
    parser.add_argument("--gitlab-rounds", type=int, default=3)
    opts = parser.parse_args()
    print(f"cotal-tasks bench: medians of {opts.rounds} rounds")
    if opts.only in (None, "github"):
        await github.main(issues=opts.github_issues, rounds=opts.github_rounds)
    if opts.only == "github":
        return
    if opts.only in (None, "gitlab"):
        await gitlab.main(issues=opts.gitlab_issues, rounds=opts.gitlab_rounds)
    if opts.only == "gitlab":
        return
    if opts.only != "board":
        await wire.main(rounds=opts.rounds)
    if opts.only == "wire":
        return
    with tempfile.TemporaryDirectory() as tmp:
        await bench_board(
            f"sqlite:///{Path(tmp) / 'bench.db'}", "SQLite (WAL)", opts.tasks, opts.rounds
        )
    if opts.postgres:
        await bench_board(opts.postgres, "PostgreSQL", opts.tasks, opts.rounds)


if __name__ == "__main__":
    asyncio.run(main())
