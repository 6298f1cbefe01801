"""``cotal-tasks mcp`` from its spawn to its tool list, beside a Python that imports the
MCP SDK's server and nothing else, in the same run.

An agent host starts ``cotal-tasks mcp`` at every session start and waits for its tools.
The bench spawns it as a host would (stdio, ``--nats``, ``--space``, ``--endpoint``)
against a bridge on its own broker, speaks MCP's JSON-RPC over the pipes (``initialize``,
``notifications/initialized``, ``tools/list``) and stops the clock at the tool list. The
limit is the spawn of ``python -c "from mcp.server import Server; from mcp.server.stdio
import stdio_server"`` to its exit: what any Python MCP server pays before it can answer.
Rounds alternate the two; each figure is the median of the rounds with their spread.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import mcp_types

from bench.figures import Seconds, Table
from bench.wire import ENDPOINT, SPACE, bridge, broker

SDK_ONLY = "from mcp.server import Server; from mcp.server.stdio import stdio_server"
SEAT = "local.agent/" + "0" * 25 + "5"


async def sdk_import_s() -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", SDK_ONLY)
    if await process.wait() != 0:
        raise RuntimeError("importing the MCP SDK failed")
    return time.perf_counter() - started


async def tool_list_s(url: str) -> tuple[float, int]:
    """Seconds from the spawn of ``cotal-tasks mcp`` to its tool list, and the tools."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "cotal-tasks"),
        *("mcp", "--as", SEAT, "--nats", url, "--space", SPACE, "--endpoint", ENDPOINT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        messages = (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
        # A host writes as soon as it has spawned; the server reads when it is ready.
        process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        await process.stdin.drain()
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), 120)
            if not line:
                raise RuntimeError("cotal-tasks mcp exited before listing its tools")
            answer = json.loads(line)
            if answer.get("id") == 2:
                elapsed = time.perf_counter() - started
                return elapsed, len(answer["result"]["tools"])
    finally:
        process.stdin.close()
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def main(rounds: int = 5) -> None:
    async with broker() as (url, nc, folder), bridge(url, nc, folder):
        await sdk_import_s()  # warm the file cache for both
        await tool_list_s(url)
        limits: list[float] = []
        starts: list[float] = []
        tools = 0
        for _ in range(rounds):
            limits.append(await sdk_import_s())
            elapsed, tools = await tool_list_s(url)
            starts.append(elapsed)
    table = Table("Agents' tools: cotal-tasks mcp from spawn to its tool list")
    limit = Seconds(tuple(limits))
    table.limit_seconds("python importing only the MCP SDK's server", limit)
    table.seconds_at_most(
        f"cotal-tasks mcp to its tool list ({tools} tools)", Seconds(tuple(starts)), limit, 1.5
    )
    table.print()
