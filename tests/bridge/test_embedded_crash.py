"""A crash leaves nothing behind: a bridge on its embedded default, killed with SIGKILL,
leaves its private nats-server running; the next start stops it and runs one broker for
the data directory. A second bridge on a live one's data directory is refused, never
given a second broker. Real subprocesses: ``cotal-tasks serve``, then ``kill -9``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cotal_tasks.bridge.process.broker import BrokerError, EmbeddedNats
from tests.support.cli import CLI
from tests.support.polling import eventually


def config(tmp_path: Path) -> Path:
    path = tmp_path / "bridge.toml"
    path.write_text(
        f"""space = "demo"
owner = "local"
data_dir = "{tmp_path / "data"}"

[http]
enabled = false

[[endpoints]]
name = "com.example.tasks"
""",
        encoding="utf-8",
    )
    return path


def brokers_of(store: Path) -> list[int]:
    """The pids of nats-servers whose JetStream store is ``store``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if args and Path(args[0].decode()).name == "nats-server" and str(store).encode() in args:
            found.append(int(entry.name))
    return found


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
    for pid in brokers_of((tmp_path / "data" / "nats").resolve()):
        os.kill(pid, signal.SIGKILL)


def serve(tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    url_file = tmp_path / "data" / "nats.url"
    url_file.unlink(missing_ok=True)
    log = tmp_path / f"bridge-{len(started)}.log"
    with log.open("wb") as sink:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [str(CLI), "serve", "--config", str(config(tmp_path))],
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    started.append(process)
    started_up = lambda: url_file.exists() or process.poll() is not None  # noqa: E731
    asyncio.run(eventually(started_up, 30, what="the bridge's nats.url", every=0.05))
    assert process.poll() is None, log.read_text(encoding="utf-8", errors="replace")
    return process


def test_the_next_start_stops_the_broker_a_killed_bridge_left(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    store = (tmp_path / "data" / "nats").resolve()
    first = serve(tmp_path, started)
    (orphan,) = brokers_of(store)

    first.send_signal(signal.SIGKILL)
    first.wait()
    time.sleep(0.2)
    assert brokers_of(store) == [orphan]  # what a crash leaves: the broker runs on

    second = serve(tmp_path, started)

    (running,) = brokers_of(store)  # one broker for the data directory, a new one
    assert running != orphan
    url = (tmp_path / "data" / "nats.url").read_text(encoding="utf-8").strip()
    assert (store / "nats-server.pid").read_text(encoding="utf-8").strip() == str(running)
    assert url.startswith("nats://127.0.0.1:")

    log = tmp_path / "third.log"
    with log.open("wb") as sink:  # a second bridge on the live one's data directory
        third = subprocess.run(
            [str(CLI), "serve", "--config", str(config(tmp_path))],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            timeout=60,
            check=False,
        )
    assert third.returncode == 1
    assert "another bridge runs the embedded broker" in log.read_text(encoding="utf-8")
    assert brokers_of(store) == [running]

    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0
    assert brokers_of(store) == []  # a clean stop leaves nothing either
    assert not (tmp_path / "data" / "nats.url").exists()


async def test_a_second_broker_for_a_live_bridges_data_directory_is_refused(
    tmp_path: Path,
) -> None:
    live = EmbeddedNats(tmp_path / "nats")
    await live.start()
    try:
        with pytest.raises(BrokerError, match="another bridge"):
            await EmbeddedNats(tmp_path / "nats").start()
        assert len(brokers_of((tmp_path / "nats").resolve())) == 1
    finally:
        await live.stop()


async def test_a_pid_file_naming_someone_elses_process_is_left_alone(tmp_path: Path) -> None:
    bystander = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)"
    )
    try:
        (tmp_path / "nats").mkdir()
        (tmp_path / "nats" / "nats-server.pid").write_text(f"{bystander.pid}\n")
        broker = EmbeddedNats(tmp_path / "nats")
        await broker.start()
        await broker.stop()
        assert bystander.returncode is None  # not a nats-server of this store: left alone
    finally:
        bystander.kill()
        await bystander.wait()
