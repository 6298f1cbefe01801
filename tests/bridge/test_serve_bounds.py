"""``cotal-tasks serve`` starts and stops within bounds (real subprocesses): the first
connection to NATS has a deadline, SIGTERM and SIGINT are honoured during start-up, and a
stop does not wait for a tracker request that never ends (``STOP_GRACE_S``)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.support.cli import CLI, run
from tests.support.polling import eventually

TOKEN_ENV = "COTAL_TASKS_TEST_BOUNDS_TOKEN"


@asynccontextmanager
async def silent_server() -> AsyncIterator[tuple[int, list[object]]]:
    """A loopback TCP server that accepts and never says a word: a hung broker or tracker.
    Yields its port and the connections it accepted."""
    accepted: list[object] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()  # until the peer goes away
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], accepted
    finally:
        server.close()
        for writer in accepted:
            writer.close()  # type: ignore[attr-defined]


@asynccontextmanager
async def tracker_that_hangs_after(answers: int) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback HTTP tracker that answers its first ``answers`` requests with an empty
    list, then never answers again. Yields its port and the requests it has read."""
    seen: list[int] = []
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while await reader.readuntil(b"\r\n\r\n"):
            seen.append(len(seen) + 1)
            if len(seen) > answers:
                await reader.read()  # hang until the peer goes away
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
            )
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        for writer in writers:
            writer.close()


def write_config(tmp: Path, body: str) -> Path:
    path = tmp / "tasks.toml"
    path.write_text(f'space = "demo"\ndata_dir = "{tmp / "data"}"\n{body}', encoding="utf-8")
    return path


async def serve(config: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(CLI),
        "serve",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, TOKEN_ENV: "ghp_unused"},
    )


async def test_serve_gives_up_on_a_silent_broker_at_its_deadline(tmp_path: Path) -> None:
    async with silent_server() as (port, _):
        config = write_config(
            tmp_path,
            f'nats_url = "nats://ops:s3cretPw@127.0.0.1:{port}"\nnats_connect_timeout_s = 2\n'
            "[http]\nenabled = false\n",
        )
        began = time.monotonic()
        code, _, err = await run("serve", "--config", str(config))
    assert time.monotonic() - began < 10  # before: retried for ever
    assert code == 1
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("cotal-tasks: ")]
    assert "nats_url" in line
    assert "nats_connect_timeout_s" in line
    assert "s3cretPw" not in err  # the URL's password is masked
    assert "nats://***@127.0.0.1" in line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_during_start_up_stops_the_bridge(
    tmp_path: Path, sig: signal.Signals
) -> None:
    async with silent_server() as (port, accepted):
        config = write_config(
            tmp_path,
            f'nats_url = "nats://127.0.0.1:{port}"\nnats_connect_timeout_s = 120\n'
            "[http]\nenabled = false\n",
        )
        process = await serve(config)
        await eventually(lambda: bool(accepted), 20, what="the bridge connecting")
        process.send_signal(sig)
        began = time.monotonic()
        out, err = await asyncio.wait_for(process.communicate(), 20)
    assert time.monotonic() - began < 5  # before: ignored until the connect succeeded
    assert process.returncode == 0, err
    assert b"start-up abandoned on " + sig.name.encode() in out


async def test_a_stop_does_not_wait_for_a_hung_tracker_request(tmp_path: Path) -> None:
    # The first contact at start is answered; the sync's first request then hangs.
    async with tracker_that_hangs_after(1) as (port, accepted):
        config = write_config(
            tmp_path,
            "[http]\nenabled = false\n"
            '[[endpoints]]\nname = "com.acme.github"\nprovider = "github"\n'
            '[endpoints.github]\nrepository = "octo-org/hello-world"\n'
            f'api_url = "http://127.0.0.1:{port}"\ntoken_env = "{TOKEN_ENV}"\n'
            "request_timeout_s = 600\n",
        )
        process = await serve(config)
        assert process.stdout is not None
        await eventually(lambda: len(accepted) > 1, 30, what="the first sync request")
        process.send_signal(signal.SIGTERM)
        began = time.monotonic()
        out, err = await asyncio.wait_for(process.communicate(), 60)
        took = time.monotonic() - began
    assert process.returncode == 0, err
    assert b"stopped cleanly" in out
    assert 8 < took < 14  # STOP_GRACE_S (10 s) for the work in flight, then it is cancelled


@pytest.mark.parametrize("hang", [True, False], ids=["silent", "closed"])
async def test_serve_gives_up_on_an_unreachable_tracker_at_its_deadline(
    tmp_path: Path, hang: bool
) -> None:
    async with silent_server() as (port, _):
        if not hang:
            await asyncio.sleep(0)
        target = port if hang else _closed_port()
        config = write_config(
            tmp_path,
            "tracker_connect_timeout_s = 3\n[http]\nenabled = false\n"
            '[[endpoints]]\nname = "com.acme.github"\nprovider = "github"\n'
            '[endpoints.github]\nrepository = "octo-org/hello-world"\n'
            f'api_url = "http://127.0.0.1:{target}"\ntoken_env = "{TOKEN_ENV}"\n',
        )
        began = time.monotonic()
        code, _, err = await run(
            "serve", "--config", str(config), env={**os.environ, TOKEN_ENV: "ghp_unused"}
        )
    assert time.monotonic() - began < 15  # before: served, retrying the tracker for ever
    assert code == 1
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("cotal-tasks: ")]
    assert "endpoints.0.github.api_url" in line
    if hang:
        assert "tracker_connect_timeout_s" in line
    else:  # a refused connection is named at once, not waited out
        assert f"connection refused at http://127.0.0.1:{target}" in line


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("command", [["serve"], ["check-config", "--online"]])
async def test_a_silent_database_is_given_up_at_its_deadline(
    tmp_path: Path, command: list[str]
) -> None:
    # A PostgreSQL server that accepts the connection and never answers its start-up.
    async with silent_server() as (port, accepted):
        config = write_config(
            tmp_path,
            "database_connect_timeout_s = 1\n[http]\nenabled = false\n"
            '[[endpoints]]\nname = "com.acme.tasks"\n'
            f'database = "postgresql://ops:s3cretPw@127.0.0.1:{port}/board"\n',
        )
        began = time.monotonic()
        code, out, err = await run(*command, "--config", str(config))
        took = time.monotonic() - began
    assert accepted  # the connection was made; the server stayed silent
    assert took < 8  # the 1 s deadline, not the driver's own default nor for ever
    assert code == 1, (out, err)
    assert "Traceback" not in out + err
    assert "s3cretPw" not in out + err
    if command == ["serve"]:
        (line,) = [line for line in err.splitlines() if line.startswith("cotal-tasks: ")]
    else:
        (line,) = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert "endpoints.0.database" in line  # before: "Check the endpoint's database"
    assert "no answer within 1 s" in line
    assert "database_connect_timeout_s" in line
