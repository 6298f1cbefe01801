"""``GET /v1/events``: ``board-changed`` as server-sent events.

Fed by the command services' change listeners (every committed change of every endpoint
this bridge serves), not by NATS. Each event carries ``endpoint``, ``changeSeq`` and
``observedAt`` and nothing else: it is a wake, and the reader refreshes under its own
authority. A comment line every ``keepalive_s`` keeps proxies and browsers from timing
the stream out. A slow reader's queue keeps the newest events: dropping a wake loses
nothing a refresh does not recover.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

from cotal_tasks.bridge.service.commands import ChangeListener
from cotal_tasks.bridge.service.metrics import Metrics

QUEUE_SIZE = 64
RETRY_MS = 3000

Event = dict[str, object]


class EventHub:
    """Fans committed changes out to every open event stream."""

    def __init__(self, queue_size: int = QUEUE_SIZE) -> None:
        self._queue_size = queue_size
        self._queues: set[asyncio.Queue[Event | None]] = set()
        self._closed = False

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
