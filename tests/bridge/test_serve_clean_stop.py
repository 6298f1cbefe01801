"""A clean stop logs no ERROR line and no traceback, in the configurations an operator
runs (real ``cotal-tasks serve`` subprocesses): an external broker with the HTTP listener
on, stopped with SIGTERM; and ``make run``'s embedded default stopped with Ctrl-C (SIGINT
to the whole process group, the embedded nats-server included)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.bridge import SPACE, broker, set_up_space
from tests.support.cli import CLI


async def stopped(args: list[str], cwd: Path, sig: signal.Signals) -> tuple[int, str, str]:
    """Start ``cotal-tasks <args>`` in a session of its own, wait for its banner, send
    ``sig`` to its process group (as a terminal's Ctrl-C does), and collect what it wrote."""
    process = await asyncio.create_subprocess_exec(
        str(CLI), *args, cwd=cwd, start_new_session=True,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), 60)
        assert first.startswith(b"cotal-tasks: serving"), first
        await asyncio.sleep(1)  # serving: its subscriptions and the listener in place
    finally:
        os.killpg(process.pid, sig)
        out, err = await asyncio.wait_for(process.communicate(), 40)
    assert process.returncode is not None
    return process.returncode, (first + out).decode(), err.decode()


def assert_clean(code: int, out: str, err: str) -> None:
    assert code == 0, err
    assert "cotal-tasks: stopped cleanly" in out
    # Before: ERROR nats.aio.client ... InvalidStateError: invalid state, from
    # _process_pong (uvicorn re-raised the signal after its own shutdown; the bridge read
    # it as a second one and cancelled its stop halfway through a drain).
    assert " ERROR " not in err, err
    assert "Traceback" not in err, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_an_external_broker_with_the_listener_stops_without_an_error(
    tmp_path: Path, sig: signal.Signals
) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = tmp_path / "tasks.toml"
        config.write_text(
            f'space = "{SPACE}"\ndata_dir = "{tmp_path / "data"}"\nnats_url = "{server.url}"\n'
            '[http]\nport = 0\n[[endpoints]]\nname = "com.acme.tasks"\n',
            encoding="utf-8",
        )
        assert_clean(*await stopped(["serve", "--config", str(config)], tmp_path, sig))


async def test_make_runs_embedded_default_stops_on_ctrl_c_without_an_error(
    tmp_path: Path,
) -> None:
    assert_clean(*await stopped(["serve"], tmp_path, signal.SIGINT))
