"""``GET /v1/events``: ``board-changed`` as server-sent events.

Fed by the command services' change listeners (every committed change of every endpoint
this bridge serves), not by NATS. Each event carries ``endpoint``, ``changeSeq`` and
``observedAt`` and nothing else: it is a wake, and the reader refreshes under its own
authority. A comment line every ``keepalive_s`` keeps proxies and browsers from timing
the stream out. A slow reader's queue keeps the newest events: dropping a wake loses
nothing a refresh does not recover.

Streams are capped (``[http.limits]``): ``max_streams`` open at once in all (past it,
503 with ``Retry-After``) and ``max_streams_per_token`` for one caller (429 with
``Retry-After``). A stream's place is taken before its answer starts and given back when
it ends, however it ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from cotal_tasks.bridge.service.commands import ChangeListener
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.core import ContractError, ErrorCode

QUEUE_SIZE = 64
RETRY_MS = 3000

Event = dict[str, object]


class EventHub:
    """Fans committed changes out to every open event stream."""

    def __init__(self, queue_size: int = QUEUE_SIZE) -> None:
        self._queue_size = queue_size
        self._queues: set[asyncio.Queue[Event | None]] = set()
        self._closed = False
        self._held: dict[str, int] = {}  # places taken, by caller

    def take_place(self, caller: str, *, most: int, most_per_caller: int) -> None:
        """Take a stream's place for ``caller``, or refuse: ``ContractError``
        (unavailable past ``most`` in all, resource-exhausted past ``most_per_caller``)."""
        if self._held.get(caller, 0) >= most_per_caller:
            raise ContractError(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"this token has {most_per_caller} event streams open already ([http.limits] "
                "max_streams_per_token). Close one (a page needs one stream), then retry",
            )
        if sum(self._held.values()) >= most:
            raise ContractError(
                ErrorCode.UNAVAILABLE,
                f"the bridge has {most} event streams open already ([http.limits] "
                "max_streams). Retry after the Retry-After seconds",
            )
        self._held[caller] = self._held.get(caller, 0) + 1

    def give_back(self, caller: str) -> None:
        left = self._held.get(caller, 0) - 1
        if left > 0:
            self._held[caller] = left
        else:
            self._held.pop(caller, None)

    @property
    def streams(self) -> int:
        return len(self._queues)

    def listener(self, endpoint: str) -> ChangeListener:
        """A service change listener that publishes ``board-changed`` for ``endpoint``."""

        async def changed(change_seq: int, observed_at: int) -> None:
            self.publish({"endpoint": endpoint, "changeSeq": change_seq, "observedAt": observed_at})

        return changed

    def publish(self, event: Event | None) -> None:
        for queue in list(self._queues):
            if queue.full():
                queue.get_nowait()  # drop the oldest wake; the newest still wakes the reader
            queue.put_nowait(event)

    @contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Event | None]]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue(self._queue_size)
        if self._closed:
            queue.put_nowait(None)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)

    def close(self) -> None:
        """End every open stream (the listener is stopping) and refuse new ones."""
        self._closed = True
        self.publish(None)


class PlacedStream(StreamingResponse):
    """An event stream that gives its place back when its answer ends, however it ends."""

    def __init__(self, content: AsyncIterator[str], *, release: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def event_stream(hub: EventHub, keepalive_s: float, metrics: Metrics) -> AsyncIterator[str]:
    """The text of one event stream, until the hub closes or the client goes away."""
    with hub.subscribe() as queue:
        metrics.event_streams.inc()
        try:
            yield f"retry: {RETRY_MS}\n: connected\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), keepalive_s)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if event is None:
                    return
                data = json.dumps(event, separators=(",", ":"))
                yield f"event: board-changed\ndata: {data}\n\n"
        finally:
            metrics.event_streams.dec()
