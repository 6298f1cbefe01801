"""``board-changed`` as an async iterator: a wake to re-read, never a fact about a task."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError
from pydantic import ValidationError

from cotal_tasks.core import BoardChanged


class BoardWatch:
    """``board-changed`` events of one endpoint, from any of its instances.

    Use it as ``async with client.watch_board() as events: async for event in events``:
    entering subscribes (and flushes, so a change made after entering is seen), leaving
    unsubscribes. Iterating without entering subscribes on the first step. An event whose
    data does not fit the published event schema is skipped, not raised: the next
    well-formed one wakes the reader just as well. The iteration ends when the watch is
    stopped or the connection is closed for good.
    """

    def __init__(self, nc: NATS, subject: str, validator: Any | None) -> None:
        self._nc = nc
        self._subject = subject
        self._validator = validator
        self._sub: Subscription | None = None
        self._stopped = False

    async def start(self) -> BoardWatch:
        if self._sub is None and not self._stopped:
            self._sub = await self._nc.subscribe(self._subject)
            await self._nc.flush()
        return self

    async def stop(self) -> None:
        """Unsubscribe; the iteration ends."""
        self._stopped = True
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()

    async def __aenter__(self) -> BoardWatch:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __aiter__(self) -> BoardWatch:
        return self

    async def __anext__(self) -> BoardChanged:
        await self.start()
        while self._sub is not None:
            try:
                msg = await self._sub.next_msg(timeout=None)
            except ConnectionClosedError:
                break  # the connection is closed for good: so is the stream
            event = self._parse(msg.data)
            if event is not None:
                return event
        raise StopAsyncIteration

    def _parse(self, data: bytes) -> BoardChanged | None:
        try:
            envelope = json.loads(data)
        except ValueError:
            return None
        if not isinstance(envelope, dict) or envelope.get("v") != 1:
            return None
        payload = envelope.get("data")
        if self._validator is not None and not self._validator.is_valid(payload):
            return None
        try:
            return BoardChanged.model_validate(payload)
        except ValidationError:
            return None
