"""The ``cotal-tasks`` command line run as a subprocess, as an operator runs it."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

CLI = Path(sys.executable).parent / "cotal-tasks"


async def run(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``cotal-tasks <args>`` (within a minute), with ``env`` if given; its exit code,
    stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        str(CLI),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=None if env is None else dict(env),
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def run_wide(*args: str) -> tuple[int, str, str]:
    """``run`` in this environment on a terminal 100 columns wide (what the tables that
    tests read are laid out for)."""
    return await run(*args, env={**os.environ, "COLUMNS": "100"})


def caller_config(tmp: Path, nats_url: str, space: str, endpoint: str) -> Path:
    """A caller's config file (``tmp/tasks.toml``): the broker at ``nats_url``, the space
    and the endpoint to call, the CLI's own data under ``tmp/cli``."""
    path = tmp / "tasks.toml"
    path.write_text(
        f'space = "{space}"\nnats_url = "{nats_url}"\ndata_dir = "{tmp}/cli"\n'
        f'[[endpoints]]\nname = "{endpoint}"\n',
        encoding="utf-8",
    )
    return path


async def run_cli(config: Path, *args: str) -> tuple[int, str, str]:
    """``run`` of ``cotal-tasks <args> --config <config>``."""
    return await run(*args, "--config", str(config))


async def cli_output(config: Path, *args: str) -> str:
    """``run_cli`` for a command that must succeed: its stdout."""
    code, out, err = await run_cli(config, *args)
    assert code == 0, err
    return out


@dataclass
class Serving:
    """A ``cotal-tasks serve`` subprocess; ``stderr`` is its whole log once it stopped."""

    process: asyncio.subprocess.Process
    stderr: bytes = b""


@asynccontextmanager
async def serving(
    config: Path, *, open_files: tuple[int, int] | None = None
) -> AsyncIterator[Serving]:
    """``cotal-tasks serve --config <config>``, up once its first line says it serves,
    stopped with SIGTERM (as an operator stops it) when the block ends; ``open_files``:
    the (soft, hard) open-file limit it is started with (``ulimit -n``), when given."""

    def limited() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, open_files)

    process = await asyncio.create_subprocess_exec(
        str(CLI), "serve", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, preexec_fn=limited,
    )  # fmt: skip
    served = Serving(process)
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 30)
        assert first.startswith(b"cotal-tasks: serving"), first
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        _, served.stderr = await asyncio.wait_for(process.communicate(), 30)
