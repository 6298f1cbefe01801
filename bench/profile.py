"""Where one write's time goes: a claim-task and an update-task over the wire, stage by stage.

``python -m bench profile`` runs the real bridge (``running_bridge``, a SQLite board, the
broker in its own process) on a thread of its own with its own event loop, and one caller
on the main thread that sends ``claim-task`` then ``update-task`` requests one at a time.
The bridge's stages are wrapped (bench-only: the modules are patched in this process) and
each wrap adds the CPU time its thread spent inside (``time.thread_time_ns``), so a stage
that waits for I/O is charged what its thread did meanwhile, never the wait: with one
request in flight, that is the stage's own work. The board's writer thread is timed the
same way, per statement kind. Every figure is microseconds of CPU per request, the median
of the rounds with their spread; the bridge's whole event-loop thread and its writer
thread are read from the thread's own clock around each round, so ``the rest`` is what
no stage claims (nats-py's parsing, the subscription's queue, the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS

from bench.board import seed_sqlite
from bench.wire import SPACE, FastCaller, Replies
from cotal_tasks.bridge.config import BridgeConfig
from cotal_tasks.bridge.process.broker import EmbeddedNats
from cotal_tasks.bridge.service import commands
from cotal_tasks.bridge.wire import admission, envelope, server, space
from cotal_tasks.bridge.wire.space import ensure_space
from cotal_tasks.bridge.wiring.process import running_bridge
from cotal_tasks.client import TasksClient
from cotal_tasks.core import Seat
from cotal_tasks.providers.board import BoardStore, sqlite, store

ENDPOINT = "com.example.bench"
REQUESTS = 300  # of each command per round


class Spans:
    """CPU nanoseconds per stage (inclusive), on whichever thread ran it."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self._depth = threading.local()

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        started = time.thread_time_ns()
        try:
            yield
        finally:
            self.ns[name] += time.thread_time_ns() - started

    def wrap_sync(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.span(name):
                return original(*args, **kwargs)

        setattr(owner, attr, timed)

    def wrap_async(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            with self.span(name):
                return await original(*args, **kwargs)

        setattr(owner, attr, timed)


class _TimedConnection:
    """A writer connection whose statements are charged by kind."""

    def __init__(self, conn: Any, spans: Spans) -> None:
        self._conn = conn
        self._spans = spans

    def execute(self, sql: str, params: Any = ()) -> Any:
        with self._spans.span("writer: " + _statement_kind(sql)):
            return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _statement_kind(sql: str) -> str:
    text = sql.lstrip().upper()
    for table, kind in (
        ("CT_IDEMPOTENCY", "idempotency record"),
        ("CT_HISTORY", "history row"),
        ("CT_TASKS", "task row (compare-and-swap)"),
        ("CT_META", "changeSeq"),
    ):
        if table in text:
            return kind
    return "transaction (BEGIN, SAVEPOINT, COMMIT)"


def instrument(spans: Spans) -> None:
    """Wrap the stages of the write path (this process only)."""
    spans.wrap_async(server.EndpointServer, "_handle", "request (all of the handling)")
    spans.wrap_sync(envelope, "parse_request", "envelope")
    spans.wrap_sync(admission.Admission, "admitted", "admission (with args)")
    spans.wrap_sync(admission, "parse_args", "  args validation (parse_args)")
    spans.wrap_async(commands.CommandService, "handle", "service (all of it)")
    spans.wrap_async(space.KvPresence, "lookup", "  presence card (environment)")
    spans.wrap_async(store.BoardStore, "get", "  current state (get)")
    spans.wrap_async(store.BoardStore, "recall", "  idempotency recall")
    spans.wrap_sync(commands, "canonical_json", "  args digest (RFC 8785)")
    for rule in ("claim_task", "update_task"):
        spans.wrap_sync(commands, rule, "  rule (transition, invariant, model)")
    spans.wrap_async(store.BoardStore, "commit", "  commit (loop side: columns, wait)")
    spans.wrap_async(commands.CommandService, "announce", "  listeners (board-changed)")
    spans.wrap_sync(server.EndpointServer, "_encode", "reply encoding")
    spans.wrap_sync(sqlite, "_commit_batch", "writer: batch (all of it)")
    connect = sqlite.connect
    sqlite.connect = lambda path: _TimedConnection(connect(path), spans)  # type: ignore[assignment,return-value]


async def _serve(config: BridgeConfig, ready: threading.Event, stop: asyncio.Event) -> None:
    async with running_bridge(config):
        ready.set()
        await stop.wait()


class BridgeThread:
    """The bridge on its own thread and event loop."""

    def __init__(self, config: BridgeConfig) -> None:
        self.loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._config = config
        self.thread = threading.Thread(target=self._run, name="bridge", daemon=True)
        self.cpu_ns: Callable[[], int] = lambda: 0

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._stop = asyncio.Event()
        clock_id = time.pthread_getcpuclockid(threading.get_ident())
        self.cpu_ns = lambda: time.clock_gettime_ns(clock_id)
        self.loop.run_until_complete(_serve(self._config, self._ready, self._stop))

    def start(self) -> None:
        self.thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the bridge did not start")

    def stop(self) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


def _writer_cpu_ns() -> int:
    for thread in threading.enumerate():
        if thread.name == "board-writer" and thread.ident is not None:
            return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
    return 0


async def main(rounds: int = 5) -> None:
    spans = Spans()
    instrument(spans)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        broker = EmbeddedNats(folder / "nats")
        url = await broker.start()
        nc = await nats.connect(url)
        try:
            await ensure_space(nc.jetstream(), SPACE)
            board = folder / "board.db"
            config = BridgeConfig.model_validate(
                {
                    "space": SPACE,
                    "nats_url": url,
                    "data_dir": str(folder / "data"),
                    "http": {"enabled": False},
                    "endpoints": [
                        {
                            "name": ENDPOINT,
                            "database": f"sqlite:///{board}",
                            "writes_per_minute_per_seat": 0,  # one caller, many writes
                        }
                    ],
                }
            )
            schema = await BoardStore.open(f"sqlite:///{board}")
            await schema.close()
            ids = seed_sqlite(board, REQUESTS * (rounds + 1))
            bridge = BridgeThread(config)
            bridge.start()
            try:
                table = await _measure(nc, bridge, spans, ids, rounds)
            finally:
                bridge.stop()
        finally:
            await nc.close()
            await broker.stop()
    _print(table, rounds)


async def _measure(
    nc: NATS, bridge: BridgeThread, spans: Spans, ids: list[str], rounds: int
) -> dict[str, dict[str, list[float]]]:
    operator = TasksClient(nc, SPACE, ENDPOINT, Seat("local", "operator", "0" * 26))
    service = await operator.describe(timeout=60)
    replies = Replies(nc)
    await replies.start()
    caller = FastCaller(replies, service, Seat("local", "bench0", "0" * 26))
    table: dict[str, dict[str, list[float]]] = {"claim-task": {}, "update-task": {}}
    for r in range(rounds + 1):  # the first round warms up
        tasks = ids[r * REQUESTS : (r + 1) * REQUESTS]
        for command in table:
            bodies = []
            for task_id in tasks:
                args: dict[str, Any] = {"taskId": task_id}
                if command == "update-task":
                    args.update(status="done", note="Finished in the bench.")
                bodies.append(caller.body(command, args))
            spans.ns.clear()
            loop_before, writer_before = bridge.cpu_ns(), _writer_cpu_ns()
            for body in bodies:
                await caller.send(command, body, mode="self")
            loop_ns, writer_ns = bridge.cpu_ns() - loop_before, _writer_cpu_ns() - writer_before
            if r == 0:
                continue
            row = table[command]
            for name, ns in (
                ("bridge event-loop thread (all of it)", loop_ns),
                ("bridge writer thread (all of it)", writer_ns),
                *spans.ns.items(),
            ):
                row.setdefault(name, []).append(ns / 1000 / REQUESTS)
    return table


def _print(table: dict[str, dict[str, list[float]]], rounds: int) -> None:
    print(f"\nOne write over the wire, stage by stage (µs of CPU per request, {rounds} rounds)")
    names = list(dict.fromkeys(n for row in table.values() for n in row))
    print(f"  {'stage':<52} " + " ".join(f"{c:<22}" for c in table))
    for name in names:
        cells = []
        for row in table.values():
            values = row.get(name)
            if not values:
                cells.append(f"{'-':<22}")
                continue
            cell = f"{statistics.median(values):,.1f} ({min(values):,.1f}–{max(values):,.1f})"
            cells.append(f"{cell:<22}")
        print(f"  {name:<52} " + " ".join(cells))
