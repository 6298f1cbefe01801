"""The command line's own cost: ``cotal-tasks --version`` and ``cotal-tasks invoke
get-task`` (against a bridge serving on a private broker), each a fresh process, as
multiples of ``python -c "import click"`` measured in the same run (a Python process that
loads only the CLI library: what no CLI written in Python can go below). Target for
``--version``: at most 3 times that.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from bench.figures import Rate, Table
from bench.wire import bridge, broker

CLI = str(Path(sys.executable).parent / "cotal-tasks")
VERSION_TARGET = 3.0
INVOKE_TARGET = 10.0


async def _runs_per_second(args: list[str], rounds: int) -> Rate:
    """Each round one fresh process from spawn to exit, as 1/seconds."""
    results = []
    for _ in range(rounds + 1):  # the first warms the file cache and is dropped
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, err = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{args[:3]} failed: {err.decode()[-300:]}")
        results.append(1 / (time.perf_counter() - started))
    return Rate(tuple(results[1:]))


async def main(rounds: int = 5) -> None:
    table = Table("CLI: one fresh process per call (runs/s; ratio: times the click baseline)")
    click_only = await _runs_per_second([sys.executable, "-c", "import click"], rounds)
    table.limit('python -c "import click"', click_only)
    version = await _runs_per_second([CLI, "--version"], rounds)
    table.cost_at_most("cotal-tasks --version", version, click_only, VERSION_TARGET)
    help_ = await _runs_per_second([CLI, "--help"], rounds)
    table.cost_at_most("cotal-tasks --help", help_, click_only, VERSION_TARGET)
    async with broker() as (url, nc, folder), bridge(url, nc, folder) as served:
        created = await served.operator.invoke("create-task", {"title": "bench"})
        args = json.dumps({"taskId": created["taskId"]})
        config = str(folder / "bench.toml")
        invoke = await _runs_per_second(
            [CLI, "invoke", "get-task", "--args", args, "--config", config], rounds
        )
    table.cost_at_most("cotal-tasks invoke get-task", invoke, click_only, INVOKE_TARGET)
    table.print()
