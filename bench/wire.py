"""Requests per second over the Cotal wire, beside a raw nats-py request/reply echo.

The broker, the bridge and the echo responder each run in their own process (the
bridge as ``cotal-tasks serve``), so the load generator here competes with neither.
Callers keep one reply subscription each and match replies by nonce, as an efficient
Cotal client does; the echo baseline uses nats-py's muxed ``request``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.embedded import EmbeddedNats
from cotal_tasks.bridge.wire.space import ensure_space
from cotal_tasks.client import Service, TasksClient, new_id
from cotal_tasks.client.subjects import CallerRail
from cotal_tasks.client.wire import nonce
from cotal_tasks.core import Seat, endpoint_token

SPACE = "bench"
ENDPOINT = "com.example.bench"
TOKEN = endpoint_token(ENDPOINT)
ECHO_SUBJECT = "bench.echo"
ECHO = (
    "import asyncio, nats, sys\n"
    "async def main():\n"
    "    nc = await nats.connect(sys.argv[1])\n"
    "    async def echo(msg):\n"
    "        await msg.respond(msg.data)\n"
    f"    await nc.subscribe('{ECHO_SUBJECT}', cb=echo)\n"
    "    await nc.flush()\n"
    "    print('ready', flush=True)\n"
    "    await asyncio.Event().wait()\n"
    "asyncio.run(main())\n"
)


class FastCaller:
    """A lean Cotal caller: one reply subscription, replies matched by nonce."""

    def __init__(self, nc: NATS, service: Service, seat: Seat) -> None:
        self.nc = nc
        self.service = service
        self.seat = seat
        self.waiting: dict[str, asyncio.Future[bytes]] = {}

    async def start(self) -> None:
        s = self.seat
        await self.nc.subscribe(
            f"cotal.{SPACE}.ep.reply.*.*.*.{s.owner}.{s.actor}.{s.lifecycleUid}.*", cb=self._reply
        )

    async def _reply(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject.rsplit(".", 1)[1], None)
        if future is not None and not future.done():
            future.set_result(msg.data)

    async def call(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        row = self.service.commands[command]
        request_nonce = nonce()
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
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[request_nonce] = future
        await self.nc.publish(
            CallerRail(SPACE, self.seat).request(TOKEN, command, request_nonce),
            json.dumps(body).encode(),
        )
        reply: dict[str, Any] = json.loads(await asyncio.wait_for(future, 10))
        if not reply["ok"]:
            raise RuntimeError(reply["error"])
        return reply


async def rate(op: Callable[[int], Awaitable[object]], callers: int, per_caller: int) -> float:
    """Requests per second with ``callers`` concurrent callers each issuing in sequence."""

    async def run(c: int) -> None:
        for i in range(per_caller):
            await op(c * per_caller + i)

    start = time.perf_counter()
    await asyncio.gather(*(run(c) for c in range(callers)))
    return callers * per_caller / (time.perf_counter() - start)


async def median_rate(
    op: Callable[[int], Awaitable[object]], callers: int, total: int, rounds: int
) -> float:
    per_caller = max(1, total // callers)
    await rate(op, callers, max(1, per_caller // 4))  # warm-up
    return statistics.median([await rate(op, callers, per_caller) for _ in range(rounds)])


async def main(rounds: int = 5, tasks: int = 500) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedNats(Path(tmp) / "nats")
        url = await broker.start()
        nc = await nats.connect(url)
        await ensure_space(nc.jetstream(), SPACE)
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f'space = "{SPACE}"\nnats_url = "{url}"\ndata_dir = "{tmp}/data"\n'
            f'[http]\nport = 0\n[[endpoints]]\nname = "{ENDPOINT}"\n',
            encoding="utf-8",
        )
        bridge = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "cotal-tasks"),
            "serve",
            "--config",
            str(config),
            stdout=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        echo = await asyncio.create_subprocess_exec(
            sys.executable, "-c", ECHO, url, stdout=asyncio.subprocess.PIPE
        )
        try:
            assert echo.stdout is not None
            await echo.stdout.readline()
            operator = TasksClient(nc, SPACE, ENDPOINT, Seat("local", "operator", "0" * 26))
            service = await operator.describe(timeout=30)
            ids = [(await operator.create_task(f"bench {n}")).taskId for n in range(tasks)]
            callers: list[FastCaller] = []
            for n in range(50):
                caller = FastCaller(nc, service, Seat("local", f"bench{n}", f"{n:026d}"))
                await caller.start()
                callers.append(caller)

            async def echo_op(i: int) -> object:
                return await nc.request(ECHO_SUBJECT, b'{"taskId":"t-0"}', timeout=10)

            def get_op(i: int) -> Awaitable[object]:
                return callers[i % 50].call("get-task", {"taskId": ids[i % tasks]})

            def list_op(i: int) -> Awaitable[object]:
                return callers[i % 50].call("list-tasks", {"limit": 100})

            print(f"\nOver the wire (bridge in its own process, SQLite board of {tasks} tasks):")
            for concurrency in (1, 50):
                total = 400 if concurrency == 1 else 1000
                echo_rate = await median_rate(echo_op, concurrency, total, rounds)
                get_rate = await median_rate(get_op, concurrency, total, rounds)
                list_rate = await median_rate(list_op, concurrency, total // 4, rounds)
                print(f"  {concurrency:>2} caller(s): raw NATS echo {echo_rate:8.1f} req/s")
                print(
                    f"              get-task       {get_rate:8.1f} req/s  "
                    f"= {get_rate / echo_rate:.2f} of the echo"
                )
                print(
                    f"              list-tasks 100 {list_rate:8.1f} req/s  "
                    f"= {list_rate / echo_rate:.2f} of the echo"
                )
        finally:
            for process in (bridge, echo):
                process.terminate()
                await process.wait()
            await nc.close()
            await broker.stop()
