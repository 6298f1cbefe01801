"""The wire without a broker: an endpoint's real server, admission and service in one process.

``LoopbackNats`` is just enough of nats-py's client for an ``EndpointServer`` and a
``TestCaller``: subscribe (with a callback, or a queue read by ``next_msg``), publish, and
the payload limit. Subjects match as NATS matches them (``*`` one token, ``>`` the rest);
every subscriber of a queue group is one member, so a message goes to the first. Nothing
else of the broker is here: no JetStream, no permissions, no lifecycle heads, so a check
that needs them (the broker's grants, a target's currency, the artifacts a describe pins)
stays on the real broker, and a loopback caller is handed what describe would bind.

``loopback_mesh`` serves one endpoint over the in-memory store: the envelope, subject and
admission refusals run through the very code the real wire runs, at the cost of a
function call, not a nats-server.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from nats.aio.client import Client as NATS

from cotal_tasks.bridge.service.commands import CommandService, ServiceSettings
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.server import EndpointServer
from cotal_tasks.core import contract_artifacts
from cotal_tasks.providers.memory import MemoryStore
from tests.bridge._support import DictPresence
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE
from tests.support.cotal import Bound, TestCaller

MAX_PAYLOAD = 1024 * 1024  # nats-server's default


@dataclass(frozen=True, slots=True)
class LoopbackMsg:
    subject: str
    data: bytes
    reply: str = ""
    headers: dict[str, str] | None = None


def matches(pattern: str, subject: str) -> bool:
    """Whether ``subject`` matches the NATS subscription ``pattern``."""
    wanted, tokens = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > index
        if index >= len(tokens) or token not in ("*", tokens[index]):
            return False
    return len(tokens) == len(wanted)


@dataclass
class LoopbackSub:
    nc: LoopbackNats
    subject: str
    queue: str
    cb: Callable[[Any], Coroutine[Any, Any, None]] | None
    messages: asyncio.Queue[LoopbackMsg] = field(default_factory=asyncio.Queue)

    async def next_msg(self, timeout: float = 1.0) -> LoopbackMsg:  # noqa: ASYNC109 (nats-py's)
        return await asyncio.wait_for(self.messages.get(), timeout)

    async def unsubscribe(self) -> None:
        self.nc.subs.remove(self)

    async def drain(self) -> None:
        await self.unsubscribe()


@dataclass
class LoopbackNats:
    subs: list[LoopbackSub] = field(default_factory=list)
    max_payload: int = MAX_PAYLOAD
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def subscribe(
        self,
        subject: str,
        queue: str = "",
        cb: Callable[[Any], Coroutine[Any, Any, None]] | None = None,
        **_: Any,  # the pending limits: a loopback delivers every message at once
    ) -> LoopbackSub:
        sub = LoopbackSub(self, subject, queue, cb)
        self.subs.append(sub)
        return sub

    async def publish(self, subject: str, payload: bytes = b"", **_: Any) -> None:
        msg = LoopbackMsg(subject, payload)
        groups: set[str] = set()
        for sub in [s for s in self.subs if matches(s.subject, subject)]:
            if sub.queue:
                if sub.queue in groups:
                    continue
                groups.add(sub.queue)
            if sub.cb is None:
                sub.messages.put_nowait(msg)
                continue
            task = asyncio.create_task(sub.cb(msg))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


@dataclass
class LoopbackMesh:
    """One endpoint served on a ``LoopbackNats`` over a ``MemoryStore``; ``caller`` makes a
    ``TestCaller`` already bound to it, as describe would have bound it."""

    nc: LoopbackNats
    server: EndpointServer
    store: MemoryStore
    bound: Bound

    def caller(self, actor: str, n: int = 1, owner: str = "local") -> TestCaller:
        caller = TestCaller(cast(NATS, self.nc), SPACE, ENDPOINT, seat(actor, n, owner))
        caller.bound = self.bound
        return caller


_INSTANCES = itertools.count(1)


@asynccontextmanager
async def loopback_mesh(clock: Callable[[], int]) -> AsyncIterator[LoopbackMesh]:
    nc = LoopbackNats()
    store = MemoryStore()
    presence = DictPresence()
    service = CommandService(store, ServiceSettings(space=SPACE), clock, presence)
    identity = InstanceIdentity(f"{next(_INSTANCES):026d}", 1)
    server = EndpointServer(
        cast(NATS, nc), SPACE, ENDPOINT, "local", identity, service, presence, lifecycle=None
    )
    await server.start()
    artifacts = contract_artifacts()
    bound = Bound(
        identity.instance_id,
        identity.epoch,
        server.describe_answer()["descriptor"],
        dict(artifacts.document),
    )
    try:
        yield LoopbackMesh(nc, server, store, bound)
    finally:
        await server.stop()
        await nc.flush()
