"""The ``cotal-tasks`` command line run as a subprocess, as an operator runs it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

CLI = Path(sys.executable).parent / "cotal-tasks"


async def run_cli(config: Path, *args: str) -> tuple[int, str, str]:
    """Run ``cotal-tasks <args> --config <config>`` (within a minute); its exit code,
    stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        str(CLI),
        *args,
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def cli_output(config: Path, *args: str) -> str:
    """``run_cli`` for a command that must succeed: its stdout."""
    code, out, err = await run_cli(config, *args)
    assert code == 0, err
    return out
