"""The wire under hostile HTTP load: the get-task rate while the bridge's listener takes a
webhook flood, and while 1,000 idle connections press on it, each as a share of the same
run's rate without them (the bridge's bounds, ``docs/operations.md`` "Security", are what
keep the wire's share near 1).

The bridge runs in its own process (``cotal-tasks serve``) with a board and a GitHub
endpoint (the fake GitHub on loopback, its webhook secret set). The flood is signed
``pull_request`` deliveries whose body mentions 5,000 issues, sent back to back by a few
clients; the idle connections are opened and held (each cut, at the head deadline or to
make room for a newcomer, opened again), a thousand at a time. Both loads run in
processes of their own: in the callers' process their client work would slow the
callers, not the bridge.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path

from nats.aio.client import Client as NATS

from bench.figures import Rate, Table
from bench.wire import CALLERS, ENDPOINT, SPACE, Served, broker, get_task_rate, serving
from cotal_tasks.bridge.process.broker import free_port
from tests.support.fake_github import (
    FakeGitHub,
    pull_request_payload,
    serve_fake_github,
    signed_webhook,
)

BOARD = ENDPOINT  # the board the wire's fast callers address
REPO = "octo-org/bench"
SECRET = "bench-webhook-secret-" + "s" * 24
TOKEN_ENV, SECRET_ENV = "COTAL_TASKS_BENCH_GITHUB_TOKEN", "COTAL_TASKS_BENCH_WEBHOOK_SECRET"
FLOODERS = 4
IDLE = 1000
MANY = 2000


@asynccontextmanager
async def hooked_bridge(
    url: str, nc: NATS, folder: Path, api_url: str, token: str, port: int
) -> AsyncIterator[Served]:
    config = folder / "hostile.toml"
    config.write_text(
        f'space = "{SPACE}"\nnats_url = "{url}"\ndata_dir = "{folder}/data"\n'
        f"[http]\nport = {port}\n"
        f'[[endpoints]]\nname = "{BOARD}"\n'
        f'[[endpoints]]\nname = "com.bench.github"\nprovider = "github"\n'
        f'[endpoints.github]\nrepository = "{REPO}"\napi_url = "{api_url}"\n'
        f'token_env = "{TOKEN_ENV}"\nwebhook_secret_env = "{SECRET_ENV}"\n',
        encoding="utf-8",
    )
    async with serving(nc, config, BOARD, {TOKEN_ENV: token, SECRET_ENV: SECRET}) as served:
        yield served


# Posts one signed delivery back to back from SENDERS clients (the URL, the sender count
# and a JSON file of the body and headers as arguments), in its own process, so the
# callers' loop measures the bridge alone and not the flood's own client work.
FLOODER = (
    "import asyncio, json, sys\n"
    "import httpx\n"
    "async def send(url, body, headers):\n"
    "    async with httpx.AsyncClient(timeout=10) as http:\n"
    "        while True:\n"
    "            try:\n"
    "                await http.post(url, content=body, headers=headers)\n"
    "            except httpx.HTTPError:\n"
    "                await asyncio.sleep(0.01)\n"
    "async def main():\n"
    "    url, senders, spec = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))\n"
    "    body = spec['body'].encode()\n"
    "    headers = spec['headers']\n"
    "    tasks = [asyncio.ensure_future(send(url, body, headers)) for _ in range(senders)]\n"
    "    print('flooding', flush=True)\n"
    "    await asyncio.gather(*tasks)\n"
    "asyncio.run(main())\n"
)


async def flood(url: str, body: bytes, headers: dict[str, str], folder: Path) -> None:
    """``FLOODERS`` clients posting the signed delivery to ``url`` back to back, from a
    process of their own, until cancelled."""
    spec = folder / "flood.json"
    spec.write_text(json.dumps({"body": body.decode(), "headers": headers}), encoding="utf-8")
    await held_process(FLOODER, url, str(FLOODERS), str(spec))


# Holds IDLE connections to the port (each opened again a second after the bridge cuts
# or refuses it), in its own process so the callers' loop measures the bridge alone.
IDLER = (
    "import asyncio, sys\n"
    "async def hold(port):\n"
    "    while True:\n"
    "        try:\n"
    "            reader, writer = await asyncio.open_connection('127.0.0.1', port)\n"
    "            await reader.read()\n"
    "            writer.close()\n"
    "        except OSError:\n"
    "            pass\n"
    "        await asyncio.sleep(1.0)\n"
    "async def main():\n"
    "    port, count = int(sys.argv[1]), int(sys.argv[2])\n"
    "    holders = [asyncio.ensure_future(hold(port)) for _ in range(count)]\n"
    "    print('holding', flush=True)\n"
    "    await asyncio.gather(*holders)\n"
    "asyncio.run(main())\n"
)


async def idle(port: int, count: int) -> None:
    """``count`` idle connections held on ``port`` until cancelled."""
    await held_process(IDLER, str(port), str(count))


async def held_process(script: str, *args: str) -> None:
    """``script`` in a Python process of its own, from its first line out until
    cancelled."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        await process.stdout.readline()
        await process.wait()
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def under(load: list[Awaitable[object]], measure: Awaitable[Rate]) -> Rate:
    tasks = [asyncio.ensure_future(x) for x in load]
    await asyncio.sleep(1.0)  # the load is on before the rounds start
    try:
        return await measure
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def main(rounds: int = 5, tasks: int = 200) -> None:
    fake = FakeGitHub()
    for k in range(1, 21):
        fake.add_issue(REPO, f"Issue {k}")
    pull = fake.add_pull(REPO, "Touches everything", head_ref="wide")
    payload = pull_request_payload(fake, "opened", REPO, int(str(pull["number"])))
    payload["pull_request"]["body"] = " ".join(f"#{n}" for n in range(10, 5010))
    port = free_port()
    async with (
        serve_fake_github(fake) as api_url,
        broker() as (url, nc, folder),
        hooked_bridge(url, nc, folder, api_url, fake.token, port) as served,
    ):
        _, measured = await get_task_rate(nc, served, rounds, tasks, MANY)

        base = f"http://127.0.0.1:{port}"
        body, headers = signed_webhook(SECRET, "pull_request", payload)
        quiet = await measured()
        mark = len(fake.requests)
        flooded = await under([flood(f"{base}/webhooks/github", body, headers, folder)], measured())
        held = await under([idle(port, IDLE)], measured())
        table = Table(
            f"The wire under hostile HTTP load (get-task, {CALLERS} callers, bridge in its "
            "own process)"
        )
        table.limit("get-task, no HTTP load", quiet)
        table.at_least(
            f"get-task under a webhook flood ({FLOODERS} senders, 5,000 issues named each)",
            flooded,
            quiet,
            0.5,
        )
        table.at_least(f"get-task under {IDLE:,} idle connections", held, quiet, 0.8)
        table.print()
        issues = f"/repos/{REPO}/issues/"
        fetched = sum(
            1
            for r in fake.requests[mark:]
            if r.path.startswith(issues) and r.path.removeprefix(issues).isdigit()
        )
        print(
            f"  issues read one by one during the flood and after: {fetched} (each delivery "
            "names 5,000; over webhook_max_issues it wakes a poll, no refresh)"
        )
