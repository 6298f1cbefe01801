"""The board and the command service against the database's own limit, in one run.

SQLite: Python's ``sqlite3`` on the same file with the board's settings (WAL,
``synchronous=FULL``) gives the limits: sequential durable one-row ``UPDATE`` commits,
point reads by task id, and the keyset page query. PostgreSQL: asyncpg's own one-row
commits (one ``UPDATE`` statement, autocommitted) on the same database. Through the
service: ``get-task`` without the read cache, a ``list-tasks`` page of 100, and writes
(``claim-task`` then ``update-task`` done, on distinct tasks) from one writer and from
50 concurrent writers, each acknowledged only after its transaction committed.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from sqlalchemy.engine import make_url

from bench.figures import Rate, Table, rounds_of, sync_rounds
from cotal_tasks.bridge.service.commands import Call, CommandService, ServiceSettings
from cotal_tasks.core import CreateTaskInput, Seat, create_task
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.board.sqlite import connect

NOW = 1_780_000_000_000
OPERATOR = Seat("local", "operator", "0" * 26)
PAGE_SQL = "SELECT seq, summary FROM ct_tasks WHERE seq > ? ORDER BY seq LIMIT 101"
WRITERS = 50


def seat(n: int) -> Seat:
    return Seat("local", f"s{n}", f"{n:026d}")


def task_rows(start: int, count: int) -> list[tuple[Any, ...]]:
    """Rows of ``count`` open tasks ``t-<n>``, as ``create-task`` would store them."""
    template = create_task(
        CreateTaskInput(title="Benchmark task", brief="Seeded for make bench."),
        task_id="t-0",
        space="bench",
        now=NOW,
    ).to_json()
    rows = []
    for n in range(start, start + count):
        body = dict(template, taskId=f"t-{n:07d}", title=f"Benchmark task {n}")
        body["createdAt"] = body["updatedAt"] = NOW + n
        summary = {k: v for k, v in body.items() if k not in ("brief", "evidence")}
        rows.append(
            (
                body["taskId"],
                "open",
                1,
                orjson.dumps(body).decode(),
                orjson.dumps(summary).decode(),
                NOW + n,
                NOW + n,
            )
        )
    return rows


COLUMNS = ["task_id", "status", "revision", "body", "summary", "created_at", "updated_at"]
INSERT = (
    "INSERT INTO ct_tasks (task_id, status, revision, body, summary, created_at, updated_at) "
    "VALUES ({})"
)


def seed_sqlite(path: Path, count: int) -> list[str]:
    """Bulk-insert ``count`` tasks below the port (set-up, not measurement)."""
    conn = connect(str(path))
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        for start in range(0, count, 50_000):
            rows = task_rows(start, min(50_000, count - start))
            conn.executemany(INSERT.format(", ".join("?" * 7)), rows)
        conn.execute("UPDATE ct_meta SET value = ? WHERE key = 'change_seq'", (count,))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()
    return [f"t-{n:07d}" for n in range(count)]


async def seed_postgres(url: str, count: int) -> list[str]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        for start in range(0, count, 10_000):
            rows = task_rows(start, min(10_000, count - start))
            await conn.copy_records_to_table(
                "ct_tasks",
                records=rows,
                columns=COLUMNS,
            )
        await conn.execute("UPDATE ct_meta SET value = $1 WHERE key = 'change_seq'", count)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return [f"t-{n:07d}" for n in range(count)]


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def fresh_postgres(admin_url: str) -> AsyncIterator[str]:
    name = "ct_bench_" + secrets.token_hex(4)
    admin = await asyncpg.connect(asyncpg_dsn(admin_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


class Writes:
    """Claim then finish distinct tasks through the service; a rate counts writes."""

    def __init__(self, service: CommandService, ids: list[str], first: int) -> None:
        self.service = service
        self.ids = ids
        self.first = first  # tasks from here on are the writers' own

    async def pair(self, i: int) -> None:
        i += self.first
        task_id = self.ids[i]
        who = seat(i)
        claim = Call("claim-task", who, f"c{i}", {"taskId": task_id}, mode="self")
        await self.service.handle(claim)
        args = {"taskId": task_id, "status": "done"}
        await self.service.handle(Call("update-task", who, f"u{i}", args, mode="self"))

    async def measure(self, concurrency: int, pairs: int, rounds: int) -> Rate:
        rate = await rounds_of(self.pair, ops=pairs, rounds=rounds, concurrency=concurrency)
        self.first += pairs * rounds
        return Rate(tuple(2 * r for r in rate.rounds))  # two writes a pair


def service_on(store: BoardStore) -> CommandService:
    clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000  # noqa: E731
    settings = ServiceSettings(space="bench", page_ceiling=100)
    return CommandService(store, settings, clock, json_reads=store)


async def bench_sqlite(folder: Path, tasks: int, rounds: int) -> None:
    path = folder / "bench.db"
    store = await BoardStore.open(f"sqlite:///{path}")  # not serving: no read cache
    await store.close()
    started = time.perf_counter()
    ids = seed_sqlite(path, tasks)
    seeded_s = time.perf_counter() - started
    store = await BoardStore.open(f"sqlite:///{path}")
    service = service_on(store)
    raw = connect(str(path))
    stack = contextlib.AsyncExitStack()
    table = Table(
        f"SQLite board (WAL, synchronous=FULL, {tasks:,} tasks, seeded in {seeded_s:.1f} s)"
    )
    try:
        stride = 7919  # visit ids out of order, the same way for both sides

        def raw_fetch(i: int) -> list[Any]:
            return raw.execute(
                "SELECT body, revision FROM ct_tasks WHERE task_id = ?",
                (ids[(i * stride) % tasks],),
            ).fetchall()

        def raw_get(i: int) -> object:
            return orjson.loads(raw_fetch(i)[0][0])

        async def get(i: int) -> object:
            args = {"taskId": ids[(i * stride) % tasks]}
            return await service.handle(Call("get-task", OPERATOR, "g", args))

        def raw_page_rows(_i: int) -> list[Any]:
            return raw.execute(PAGE_SQL, (0,)).fetchall()

        def raw_page(_i: int) -> object:
            return [orjson.loads(summary) for _seq, summary in raw_page_rows(_i)[:100]]

        async def page(_i: int) -> object:
            return await service.handle(Call("list-tasks", OPERATOR, "l", {"limit": 100}))

        def raw_commit(i: int) -> object:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(
                "UPDATE ct_tasks SET updated_at = ? WHERE task_id = ?", (NOW + i, ids[-1 - i])
            )
            return raw.execute("COMMIT")

        point = sync_rounds(raw_get, ops=20_000, rounds=rounds)
        table.limit("point read by id (sqlite3, body decoded by orjson)", point)
        got = await rounds_of(get, ops=5_000, rounds=rounds, warm_up=500)
        table.at_least("get-task through the service, no read cache", got, point, 0.3)
        bare = sync_rounds(raw_fetch, ops=20_000, rounds=rounds)
        table.info("  the same against the bare row fetch (no decoding)", got, bare)
        keyset = sync_rounds(raw_page, ops=2_000, rounds=rounds)
        table.limit("keyset page of 100 (sqlite3, summaries decoded by orjson)", keyset)
        paged = await rounds_of(page, ops=1_000, rounds=rounds, warm_up=100)
        table.cost_at_most("list-tasks page of 100: cost x the keyset query", paged, keyset, 1.5)
        bare_page = sync_rounds(raw_page_rows, ops=2_000, rounds=rounds)
        table.info("  cost x the bare keyset fetch (no decoding)", paged, bare_page, cost=True)

        durable = sync_rounds(raw_commit, ops=300, rounds=rounds)
        table.limit("durable one-row UPDATE commit (sqlite3, sequential)", durable)
        # Writes as the bridge serves them: the serving store (sole writer, read cache).
        serving = await BoardStore.open(f"sqlite:///{path}", serve=True)
        stack.push_async_callback(serving.close)
        writes = Writes(service_on(serving), ids, first=0)
        one = await writes.measure(1, pairs=100, rounds=rounds)
        table.at_least("claim + update done, 1 writer (writes/s)", one, durable, 0.2)
        many = await writes.measure(WRITERS, pairs=1_000, rounds=rounds)
        table.at_least(f"claim + update done, {WRITERS} writers (writes/s)", many, durable, 0.5)
    finally:
        await stack.aclose()
        raw.close()
        await store.close()
    table.print()


async def bench_postgres(admin_url: str, tasks: int, rounds: int) -> None:
    async with fresh_postgres(admin_url) as url:
        store = await BoardStore.open(url)
        ids = await seed_postgres(url, tasks)
        service = service_on(store)
        raw = await asyncpg.connect(asyncpg_dsn(url))
        table = Table(f"PostgreSQL board ({tasks:,} tasks)")
        try:

            async def raw_commit(i: int) -> object:
                return await raw.execute(
                    "UPDATE ct_tasks SET updated_at = $1 WHERE task_id = $2", NOW + i, ids[-1 - i]
                )

            async def raw_get(i: int) -> object:
                return await raw.fetchrow(
                    "SELECT body, revision FROM ct_tasks WHERE task_id = $1", ids[i % tasks]
                )

            async def get(i: int) -> object:
                args = {"taskId": ids[i % tasks]}
                return await service.handle(Call("get-task", OPERATOR, "g", args))

            durable = await rounds_of(raw_commit, ops=300, rounds=rounds)
            table.limit("one-row UPDATE commit (asyncpg, sequential)", durable)
            writes = Writes(service, ids, first=0)
            one = await writes.measure(1, pairs=100, rounds=rounds)
            table.at_least("claim + update done, 1 writer (writes/s)", one, durable, 0.2)
            many = await writes.measure(WRITERS, pairs=500, rounds=rounds)
            table.at_least(f"claim + update done, {WRITERS} writers (writes/s)", many, durable, 0.5)
            point = await rounds_of(raw_get, ops=2_000, rounds=rounds)
            table.limit("point read by id (asyncpg)", point)
            got = await rounds_of(get, ops=2_000, rounds=rounds, warm_up=200)
            table.info("get-task through the service", got, point)
        finally:
            await raw.close()
            await store.close()
        table.print()
