"""The wire's presence source: each lookup reads the card as it is now, with one round
trip (the bucket is asked for once, not before every lookup)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.js import JetStreamContext

from cotal_tasks.bridge.wire.space import KvPresence, ensure_space
from cotal_tasks.core import Seat
from tests.support.bridge import SPACE, broker, client
from tests.support.cotal import Space

SEAT = Seat("local", "coder", "01j0000000000000000000000a")


class CountingJs:
    """A JetStream context that counts the bucket look-ups (each one asks the broker)."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js
        self.buckets = 0

    async def key_value(self, bucket: str) -> Any:
        self.buckets += 1
        return await self.js.key_value(bucket)


async def test_lookups_read_the_current_card_and_ask_for_the_bucket_once(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path) as server:
        nc = await client(server.url)
        try:
            js = nc.jetstream()
            await ensure_space(js, SPACE)
            space = Space(js, SPACE)
            counting = CountingJs(js)
            presence = KvPresence(counting, SPACE)  # type: ignore[arg-type]
            assert await presence.lookup(SEAT.owner, SEAT.actor) is None
            await space.present(SEAT, environment="env-a")
            first = await presence.lookup(SEAT.owner, SEAT.actor)
            await space.present(SEAT, environment="env-b")
            second = await presence.lookup(SEAT.owner, SEAT.actor)
            assert first is not None
            assert first.environment == "env-a"
            assert second is not None
            assert second.environment == "env-b"
            assert second.lifecycleUid == SEAT.lifecycleUid
            assert second.fresh
            assert counting.buckets == 1
        finally:
            await nc.close()


async def test_a_bucket_made_after_a_lookup_is_found(tmp_path: Path) -> None:
    async with broker(tmp_path) as server:
        nc = await client(server.url)
        try:
            js = nc.jetstream()
            presence = KvPresence(js, SPACE)
            assert await presence.lookup(SEAT.owner, SEAT.actor) is None  # no bucket yet
            await ensure_space(js, SPACE)
            await Space(js, SPACE).present(SEAT, environment="env-a")
            card = await presence.lookup(SEAT.owner, SEAT.actor)
            assert card is not None
            assert card.environment == "env-a"
        finally:
            await nc.close()
