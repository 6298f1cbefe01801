"""A flush that follows the publish: the broker's refusal of a publish is read before the
flush returns, every time, so the client never mistakes a refusal for silence."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from cotal_tasks.client.wire import denial_watch, flush_queued
from tests.support.bridge import broker, client

# nats-py writes a flush's PING ahead of a publish its flusher task has not written yet,
# which lost the refusal in one round of a hundred or more; this many rounds catch that.
ROUNDS = 500


async def test_a_refused_publish_is_read_before_the_flush_returns(tmp_path: Path) -> None:
    password = secrets.token_hex(12)
    users = [
        {
            "user": "seat",
            "password": password,
            "permissions": {"publish": {"deny": ["refused.>"]}},
        }
    ]
    conf = tmp_path / "nats.conf"
    conf.write_text("authorization: " + json.dumps({"users": users}) + "\n", encoding="utf-8")
    async with broker(tmp_path, config_file=conf) as server:
        seen: list[Exception] = []

        async def errors(exc: Exception) -> None:
            seen.append(exc)

        nc = await client(server.url, user="seat", password=password, error_cb=errors)
        try:
            watch = denial_watch(nc)
            late = []
            for n in range(ROUNDS):
                mark = watch.mark()
                sub = await nc.subscribe(f"allowed.{n}")
                await nc.publish(f"refused.{n}", b"{}", reply=f"allowed.{n}")
                await flush_queued(nc)
                if not watch.denied(mark, "publish", f"refused.{n}"):
                    late.append(n)
                await sub.unsubscribe()
            await flush_queued(nc)
            assert late == []
            assert len(seen) == ROUNDS  # one refusal each, all passed on to the caller's callback
        finally:
            await nc.close()
