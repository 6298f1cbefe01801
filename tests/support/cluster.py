"""Real things at cluster scale, on loopback: a three-node nats-server cluster with
JetStream (routes between the nodes, R3 streams), and bridges as separate processes
(``cotal-tasks serve``) that a test may kill with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats
from nats.aio.client import Client as NATS

from cotal_tasks.bridge.process.broker import EmbeddedNats, free_port
from tests.support.cli import CLI


@dataclass
class NatsCluster:
    """``size`` nats-server nodes, clustered by routes, JetStream on every node."""

    root: Path
    size: int = 3
    nodes: list[EmbeddedNats] = field(default_factory=list)

    async def start(self) -> None:
        routes = [free_port() for _ in range(self.size)]
        listed = ", ".join(f"nats-route://127.0.0.1:{port}" for port in routes)
        for index, route in enumerate(routes):
            conf = self.root / f"n{index}.conf"
            self.root.mkdir(parents=True, exist_ok=True)
            conf.write_text(
                f"server_name: n{index}\n"
                f"cluster {{\n  name: tasks\n  listen: 127.0.0.1:{route}\n"
                f"  routes: [{listed}]\n}}\n",
                encoding="utf-8",
            )
            node = EmbeddedNats(self.root / f"n{index}", config_file=conf)
            await node.start()
            self.nodes.append(node)
        await self._jetstream_ready()

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    async def _jetstream_ready(self, within_s: float = 30.0) -> None:
        """Wait until the JetStream meta group has a leader (the cluster takes writes)."""
        nc = await self.client()
        try:
            deadline = time.monotonic() + within_s
            while True:
                try:
                    await nc.jetstream().account_info()
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        finally:
            await nc.close()

    async def client(self, urls: Sequence[str] | None = None) -> NATS:
        return await nats.connect(
            servers=list(urls or self.urls),
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            connect_timeout=2,
        )

    async def stop(self) -> None:
        for node in self.nodes:
            await node.stop()


@dataclass
class BridgeProcess:
    """One ``cotal-tasks serve`` subprocess; its HTTP port answers ``/healthz``."""

    name: str
    config: Path
    http_port: int
    log: Path
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    token: str | None = None  # a tasks.read token: /healthz details (the sync role) need one

    async def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = await asyncio.create_subprocess_exec(
                str(CLI),
                "serve",
                "--config",
                str(self.config),
                stdout=sink,
                stderr=sink,
                env=self.env,
            )

    async def health(self) -> dict[str, object] | None:
        try:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            async with httpx.AsyncClient(timeout=2, headers=headers) as http:
                response = await http.get(f"http://127.0.0.1:{self.http_port}/healthz")
        except httpx.HTTPError:
            return None
        body: dict[str, object] = response.json()
        return body

    async def role(self, endpoint: str) -> str | None:
        """``leader``/``follower`` of a hosted endpoint, as ``/healthz`` says."""
        body = await self.health()
        if body is None:
            return None
        entry = body.get("endpoints", {}).get(endpoint, {})  # type: ignore[attr-defined]
        role = (entry.get("sync") or {}).get("role")
        return str(role) if role is not None else None

    def kill(self) -> None:
        """SIGKILL: no drain, no lease handed over, nothing cleaned up."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout=20)
        except TimeoutError:
            self.process.kill()
            with contextlib.suppress(ProcessLookupError):
                await self.process.wait()
