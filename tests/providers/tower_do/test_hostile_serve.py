"""A FIFO in the board's folder against ``cotal-tasks serve`` (a real subprocess on its
embedded nats-server): a FIFO in ``live/`` leaves every command answering; a FIFO as the
board makes the endpoint stale and not ready on ``/healthz``, naming it; SIGTERM stops the
bridge within its bounded stop, cleanly, whatever is in the folder."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx

from tests.bridge.test_serve_readiness import dashboard_url
from tests.providers.tower_do._support import agent_event
from tests.support.cli import CLI, run_cli
from tests.support.polling import eventually

ENDPOINT = "com.acme.agents"
WORKER = "local.worker/01j9worker0000000000000000"
STOP_WITHIN_S = 20  # the bridge's STOP_DEADLINE_S (15 s), and the process's own exit


async def test_fifos_in_the_folder_neither_hang_nor_hide_the_endpoint(tmp_path: Path) -> None:
    """Before: the claim waited on the FIFO in ``live/`` for ever (under the store's lock,
    so every later command waited too), ``/healthz`` said ready over a FIFO board, and
    SIGTERM left the process alive while the FIFO had no writer."""
    board = tmp_path / "project" / "board.jsonl"
    (board.parent / "live").mkdir(parents=True)
    board.write_text(
        agent_event("port", "Port the parser", "pending", "coder-1", 1_700_000_000_000)
    )
    os.mkfifo(board.parent / "live" / "ghost.s1.json")
    config = tmp_path / "tasks.toml"
    config.write_text(
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n'
        "[http]\nport = 0\nlocal_reader = true\n"
        f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "tower-do"\n'
        f'[endpoints.tower_do]\nboard = "{board}"\npoll_interval_s = 0.3\n'
        '[endpoints.tower_do.seats]\n"coder-1" = "local.worker"\n',
        encoding="utf-8",
    )
    process = await asyncio.create_subprocess_exec(
        str(CLI), "serve", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stopped_in: float | None = None
    try:
        url = await dashboard_url(process)
        code, out, err = await run_cli(
            config,
            *("invoke", "claim-task", "--mode", "self", "--as", WORKER),
            *("--args", '{"taskId":"port"}'),
        )
        assert code == 0, (out, err)
        assert '"claimed"' in out
        board.rename(board.with_suffix(".old"))
        os.mkfifo(board)  # the board itself a FIFO now
        async with httpx.AsyncClient(base_url=url) as http:

            async def not_ready() -> bool:
                return (await http.get("/healthz")).status_code == 503

            await eventually(not_ready, 20, what="the endpoint not ready")
            entry = (await http.get("/healthz")).json()["endpoints"][ENDPOINT]
            assert entry["ready"] is False
            assert "a FIFO" in entry["notReady"]
            assert "a FIFO" in entry["stale"]["reason"]
            listed = (await http.get(f"/v1/endpoints/{ENDPOINT}/tasks")).json()
            assert "a FIFO" in listed["stale"]["reason"]  # reads carry stale
    finally:
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), STOP_WITHIN_S)
            stopped_in = time.monotonic() - began
        except TimeoutError:
            process.kill()
            out_bytes, err_bytes = await process.communicate()
    log = err_bytes.decode()
    assert stopped_in is not None, f"still running {STOP_WITHIN_S} s after SIGTERM:\n{log}"
    assert process.returncode == 0, log
    assert "cotal-tasks: stopped cleanly" in out_bytes.decode()
    assert "Traceback" not in log


async def test_a_fifo_board_from_the_start_starts_not_ready_and_fails_the_online_check(
    tmp_path: Path,
) -> None:
    """Before: the start's first contact read the FIFO and waited on it (and the process,
    on its thread) until ``tracker_connect_timeout_s`` blamed the network; check-config
    --online waited the same, then answered an unexpected error."""
    board = tmp_path / "project" / "board.jsonl"
    board.parent.mkdir()
    os.mkfifo(board)
    config = tmp_path / "tasks.toml"
    config.write_text(
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n'
        "[http]\nport = 0\nlocal_reader = true\n"
        f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "tower-do"\n'
        f'[endpoints.tower_do]\nboard = "{board}"\n',
        encoding="utf-8",
    )
    began = time.monotonic()
    code, out, _ = await run_cli(config, "check-config", "--online")
    assert time.monotonic() - began < 20
    assert code == 1, out
    (line,) = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert f"the tower-do board {board} cannot be read (it is a FIFO" in line
    process = await asyncio.create_subprocess_exec(
        str(CLI), "serve", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        url = await dashboard_url(process)
        async with httpx.AsyncClient(base_url=url) as http:

            async def not_ready() -> bool:
                return (await http.get("/healthz")).status_code == 503

            await eventually(not_ready, 20, what="the endpoint not ready")
            entry = (await http.get("/healthz")).json()["endpoints"][ENDPOINT]
            assert "a FIFO" in entry["notReady"]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err_bytes = await asyncio.wait_for(process.communicate(), STOP_WITHIN_S)
    assert process.returncode == 0, err_bytes.decode()
    assert "Traceback" not in err_bytes.decode()
    assert err_bytes.decode().count("tower-do refresh failed") == 1  # once, not every poll
