"""Requests per second over the Cotal wire, beside a raw nats-py echo on the same broker.

The broker, the bridge (``cotal-tasks serve``) and the echo responder each run in their
own process, so the load generator here competes with neither. Both sides are driven by
the same lean client: one reply subscription for every caller, replies matched by nonce,
JSON by orjson, and the same request bytes (a ``get-task`` envelope) sent to the echo.
The bridge's request bodies are built before each round, as the echo's bytes are; only
sending, the reply and (for the bridge) decoding and checking it are timed.
Rounds alternate echo and bridge so both see the same machine; each figure is the median
of the rounds, with their spread.

Beside them, a canned responder (the Cotal-shaped one): a raw nats-py process on the
Cotal request subjects (another endpoint token of the same length) that answers every
request with the same stored ``get-task`` reply on the reply subject the bridge would
derive, doing nothing else. The same callers send it the same bodies and decode its reply
as they decode the bridge's, so it is what the Cotal subjects and the caller's reading of
a reply cost by themselves; ``get-task`` at 50 callers is held to it (target 0.85), and
shown beside the raw echo without a target (docs/architecture.md, where the time goes).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import orjson
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bench.figures import Rate, Table
from cotal_tasks.bridge.process.broker import EmbeddedNats
from cotal_tasks.bridge.wire.space import ensure_space
from cotal_tasks.client import Service, TasksClient, new_id
from cotal_tasks.client.subjects import CallerRail
from cotal_tasks.core import Seat, endpoint_token

SPACE = "bench"
ENDPOINT = "com.example.bench"
TOKEN = endpoint_token(ENDPOINT)
ECHO_SUBJECT = "bench.echo"
# The canned responder's endpoint token: another endpoint, its token as long as TOKEN's.
CANNED_TOKEN = TOKEN[:-1] + ("x" if TOKEN[-1] != "x" else "y")
INBOX = "bench.inbox"
CALLERS = 50
# Requests in a round at 50 callers: enough that a round of the echo lasts a few tenths
# of a second, so one scheduler hiccup on a shared machine does not decide a round.
MANY = 10_000
ECHO = (
    "import asyncio, nats, sys\n"
    "async def main():\n"
    "    nc = await nats.connect(sys.argv[1])\n"
    "    async def echo(msg):\n"
    "        await nc.publish(msg.reply, msg.data)\n"
    f"    await nc.subscribe('{ECHO_SUBJECT}', cb=echo)\n"
    "    await nc.flush()\n"
    "    print('ready', flush=True)\n"
    "    await asyncio.Event().wait()\n"
    "asyncio.run(main())\n"
)

# Answers ``get-task`` on CANNED_TOKEN with argv[2] (a stored reply), on the reply subject
# derived from the request subject as the bridge derives it (argv[3] the instance id,
# argv[4] the epoch), each reply subject head derived once per request subject head.
CANNED = (
    "import asyncio, nats, sys\n"
    "async def main():\n"
    "    nc = await nats.connect(sys.argv[1])\n"
    "    reply, instance, epoch = sys.argv[2].encode(), sys.argv[3], sys.argv[4]\n"
    "    heads = {}\n"
    "    async def serve(msg):\n"
    "        head, _, nonce = msg.subject.rpartition('.')\n"
    "        to = heads.get(head)\n"
    "        if to is None:\n"
    "            t = head.split('.')\n"
    "            to = heads[head] = '.'.join(\n"
    "                [*t[:3], 'reply', t[4], instance, epoch, *t[-3:], '']\n"
    "            )\n"
    "        await nc.publish(to + nonce, reply)\n"
    f"    subject = 'cotal.{SPACE}.ep.one.{CANNED_TOKEN}.get-task.>'\n"
    f"    await nc.subscribe(subject, queue='{CANNED_TOKEN}', cb=serve)\n"
    "    await nc.flush()\n"
    "    print('ready', flush=True)\n"
    "    await asyncio.Event().wait()\n"
    "asyncio.run(main())\n"
)


class Replies:
    """One subscription for every caller's replies; a reply resolves its nonce's future."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc
        self.waiting: dict[str, asyncio.Future[bytes]] = {}
        self._nonces = itertools.count()

    async def start(self) -> None:
        await self.nc.subscribe(f"cotal.{SPACE}.ep.reply.>", cb=self._reply)
        await self.nc.subscribe(f"{INBOX}.*", cb=self._reply)

    async def _reply(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject.rsplit(".", 1)[1], None)
        if future is not None and not future.done():
            future.set_result(msg.data)

    def expect(self) -> tuple[str, asyncio.Future[bytes]]:
        request_nonce = f"bench{next(self._nonces):020d}"  # a nonce is 22 to 64 characters
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[request_nonce] = future
        return request_nonce, future


class FastCaller:
    """A lean Cotal caller: the envelope's fixed parts built once."""

    def __init__(self, replies: Replies, service: Service, seat: Seat) -> None:
        self.replies = replies
        self.service = service
        self.seat = seat
        self.rail = CallerRail(SPACE, seat)
        # Each command's request subject up to its nonce, as the echo's reply subject is
        # its fixed inbox prefix and the nonce: the same string work on both sides.
        self._subjects: dict[tuple[str, str | None, str], str] = {}

    def body(self, command: str, args: dict[str, Any]) -> bytes:
        row = self.service.commands[command]
        body = {
            "v": 1,
            "id": new_id(),
            "op": {
                "endpoint": ENDPOINT,
                "command": command,
                "inputDigest": row.input_digest,
                "outputDigest": row.output_digest,
            },
            "class": "ephemeral",
            "replyExpected": True,
            "deadlineMs": 10_000,
            "from": {"id": self.seat.principal, "name": "bench"},
            "args": args,
            "bind": self.service.bind(),
        }
        return orjson.dumps(body)

    async def call(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.send(command, self.body(command, args))

    async def send(
        self, command: str, body: bytes, mode: str | None = None, token: str = TOKEN
    ) -> dict[str, Any]:
        """Send a prepared ``body`` (see ``Bodies``) to the endpoint of ``token`` and
        return the reply, refused if not ok."""
        request_nonce, future = self.replies.expect()
        head = self._subjects.get((command, mode, token))
        if head is None:
            head = self.rail.request(token, command, "", mode=mode)
            self._subjects[command, mode, token] = head
        await self.replies.nc.publish(head + request_nonce, body)
        reply: dict[str, Any] = orjson.loads(await future)
        if not reply["ok"]:
            raise RuntimeError(reply["error"])
        return reply

    async def echo(self, data: bytes) -> bytes:
        request_nonce, future = self.replies.expect()
        await self.replies.nc.publish(ECHO_SUBJECT, data, reply=f"{INBOX}.{request_nonce}")
        return await future


class Bodies:
    """Request bodies built before a round, so the round times the wire and not the
    building: the echo is sent bytes built once, and the bridge's callers are not made
    to do more in the timed part than that. Each round gets fresh request ids."""

    def __init__(self, build: Callable[[int], bytes], count: int) -> None:
        self.build = build
        self.count = count
        self.ready: list[bytes] = []

    def refresh(self) -> None:
        self.ready = [self.build(i) for i in range(self.count)]

    def __getitem__(self, i: int) -> bytes:
        return self.ready[i % self.count]


async def rate(op: Callable[[int], Awaitable[object]], callers: int, per_caller: int) -> float:
    """Requests per second with ``callers`` concurrent callers each issuing in sequence."""

    async def run(c: int) -> None:
        for i in range(per_caller):
            await op(c * per_caller + i)

    start = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(run(c) for c in range(callers))), 120)
    return callers * per_caller / (time.perf_counter() - start)


async def paired(
    ops: dict[str, Callable[[int], Awaitable[object]]],
    callers: int,
    total: int,
    rounds: int,
    bodies: tuple[Bodies, ...] = (),
) -> dict[str, Rate]:
    """Each op in turn, round after round (after one warm-up round each); ``bodies`` are
    built afresh before every timed round, outside its timing."""
    per_caller = max(1, total // callers)
    for op in ops.values():
        for prepared in bodies:
            prepared.refresh()
        await rate(op, callers, max(1, per_caller // 4))
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            for prepared in bodies:
                prepared.refresh()
            samples[name].append(await rate(op, callers, per_caller))
    return {name: Rate(tuple(values)) for name, values in samples.items()}


@dataclass
class Served:
    """A bridge process serving one endpoint, and how long it took to answer describe."""

    process: asyncio.subprocess.Process
    operator: TasksClient
    service: Service
    start_s: float


@asynccontextmanager
async def broker(max_payload: int | None = None) -> AsyncIterator[tuple[str, NATS, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedNats(Path(tmp) / "nats", max_payload=max_payload)
        url = await server.start()
        nc = await nats.connect(url)
        try:
            await ensure_space(nc.jetstream(), SPACE)
            yield url, nc, Path(tmp)
        finally:
            await nc.close()
            await server.stop()


@asynccontextmanager
async def bridge(
    url: str, nc: NATS, folder: Path, database: str | None = None
) -> AsyncIterator[Served]:
    """``cotal-tasks serve`` on the broker; ``start_s`` runs from the spawn to describe."""
    config = folder / "bench.toml"
    # No per-seat write rate: the benches measure how fast writes go, a few callers each
    # sending thousands (the bound has a test of its own).
    endpoint = f'[[endpoints]]\nname = "{ENDPOINT}"\nwrites_per_minute_per_seat = 0\n'
    if database is not None:
        endpoint += f'database = "{database}"\n'
    config.write_text(
        f'space = "{SPACE}"\nnats_url = "{url}"\ndata_dir = "{folder}/data"\n'
        f"[http]\nport = 0\n{endpoint}",
        encoding="utf-8",
    )
    async with serving(nc, config, ENDPOINT, {"PYTHONUNBUFFERED": "1"}) as served:
        yield served


@asynccontextmanager
async def serving(
    nc: NATS, config: Path, endpoint: str, env: dict[str, str]
) -> AsyncIterator[Served]:
    """``cotal-tasks serve --config config`` (with ``env`` added), until ``endpoint``
    answers describe; ``start_s`` runs from the spawn to that answer."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "cotal-tasks"),
        "serve",
        "--config",
        str(config),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    try:
        operator = TasksClient(nc, SPACE, endpoint, Seat("local", "operator", "0" * 26))
        service = await operator.describe(timeout=120)
        yield Served(process, operator, service, time.perf_counter() - started)
    finally:
        process.terminate()
        await process.wait()


@asynccontextmanager
async def echo_process(url: str) -> AsyncIterator[None]:
    echo = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ECHO, url, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert echo.stdout is not None
        await echo.stdout.readline()
        yield
    finally:
        echo.terminate()
        await echo.wait()


@asynccontextmanager
async def canned_process(url: str, reply: bytes, bind: dict[str, Any]) -> AsyncIterator[None]:
    """The canned responder (``CANNED``) answering with ``reply`` as the instance ``bind``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CANNED,
        url,
        reply.decode(),
        str(bind["instanceId"]),
        str(bind["epoch"]),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        await process.stdout.readline()
        yield
    finally:
        process.terminate()
        await process.wait()


async def callers_of(nc: NATS, served: Served, count: int = CALLERS) -> list[FastCaller]:
    replies = Replies(nc)
    await replies.start()
    seats = [Seat("local", f"bench{n}", f"{n:026d}") for n in range(count)]
    return [FastCaller(replies, served.service, s) for s in seats]


async def get_task_rate(
    nc: NATS, served: Served, rounds: int, tasks: int, many: int = MANY
) -> tuple[list[FastCaller], Callable[[], Awaitable[Rate]]]:
    """``tasks`` tasks created on ``served`` and its callers, with a measurement of get-task
    (``many`` requests a round at ``CALLERS`` callers) to repeat under each load a part
    applies."""
    ids = [
        (await served.operator.invoke("create-task", {"title": f"bench {n}"}))["taskId"]
        for n in range(tasks)
    ]
    callers = await callers_of(nc, served)
    gets = Bodies(lambda i: callers[i % CALLERS].body("get-task", {"taskId": ids[i % tasks]}), many)

    def get(i: int) -> Awaitable[object]:
        return callers[i % CALLERS].send("get-task", gets[i])

    async def measured() -> Rate:
        return (await paired({"get": get}, CALLERS, many, rounds, (gets,)))["get"]

    return callers, measured


async def main(rounds: int = 5, tasks: int = 500) -> None:
    async with broker() as (url, nc, folder), bridge(url, nc, folder) as served, echo_process(url):
        ids = [
            (await served.operator.invoke("create-task", {"title": f"bench {n}"}))["taskId"]
            for n in range(tasks)
        ]
        callers = await callers_of(nc, served)
        request = callers[0].body("get-task", {"taskId": ids[0]})
        stored = orjson.dumps(await callers[0].send("get-task", request))  # a real reply

        def echo(i: int) -> Awaitable[object]:
            return callers[i % CALLERS].echo(request)

        gets = Bodies(
            lambda i: callers[i % CALLERS].body("get-task", {"taskId": ids[i % tasks]}), MANY
        )
        pages = Bodies(lambda i: callers[i % CALLERS].body("list-tasks", {"limit": 100}), 500)

        def get(i: int) -> Awaitable[object]:
            return callers[i % CALLERS].send("get-task", gets[i])

        def canned(i: int) -> Awaitable[object]:
            return callers[i % CALLERS].send("get-task", gets[i], token=CANNED_TOKEN)

        def page(i: int) -> Awaitable[object]:
            return callers[i % CALLERS].send("list-tasks", pages[i])

        table = Table(
            f"Over the wire (bridge, broker and echo in their own processes, {tasks} tasks)"
        )
        one = await paired({"echo": echo, "get": get}, 1, 500, rounds, (gets,))
        table.limit("raw nats-py echo, 1 caller", one["echo"])
        table.at_least("get-task, 1 caller", one["get"], one["echo"], 0.7)
        async with canned_process(url, stored, served.service.bind()):
            ops: dict[str, Callable[[int], Awaitable[object]]] = {
                "echo": echo,
                "get": get,
                "canned": canned,
            }
            many = await paired(ops, CALLERS, MANY, rounds, (gets,))
        table.limit(f"raw nats-py echo, {CALLERS} callers", many["echo"])
        table.info(
            f"  canned reply on the Cotal subjects, {CALLERS} callers",
            many["canned"],
            many["echo"],
            target="none",
        )
        table.info(
            f"get-task, {CALLERS} callers, beside the echo",
            many["get"],
            many["echo"],
            target="none",
        )
        table.at_least(
            f"get-task, {CALLERS} callers, beside the Cotal-shaped responder",
            many["get"],
            many["canned"],
            0.85,
        )
        listed = await paired({"page": page}, CALLERS, 500, rounds, (pages,))
        table.at_least(f"list-tasks page of 100, {CALLERS} callers", listed["page"], None, 1_000)
        table.print()
