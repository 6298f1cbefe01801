"""The embedded broker keeps its port across restarts when the port is free, so a client
connected before the restart reconnects to the address it knows; a port taken meanwhile
gives way to a fresh one. The port is kept in the store's private ``nats-server.port``."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import nats

from cotal_tasks.bridge.process.broker import EmbeddedNats
from tests.support.polling import eventually


async def test_a_restart_keeps_the_port_and_a_connected_client_comes_back(
    tmp_path: Path,
) -> None:
    store = tmp_path / "nats"
    first = EmbeddedNats(store)
    url = await first.start()
    client = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        await first.stop()
        second = EmbeddedNats(store)
        try:
            assert await second.start() == url  # before: a new free port every start

            async def back() -> bool:
                return client.is_connected

            await eventually(back, 20, what="the client's reconnect to the same address")
            await client.flush(timeout=5)
        finally:
            await second.stop()
    finally:
        await client.close()
    kept = store / "nats-server.port"
    assert kept.read_text() == f"{first.port}\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


async def test_a_taken_port_gives_way_to_a_fresh_one(tmp_path: Path) -> None:
    store = tmp_path / "nats"
    first = EmbeddedNats(store)
    await first.start()
    await first.stop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", first.port))
        squatter.listen()
        second = EmbeddedNats(store)
        await second.start()
        try:
            assert second.port != first.port
        finally:
            await second.stop()
    assert (store / "nats-server.port").read_text() == f"{second.port}\n"


async def test_a_damaged_port_file_is_ignored(tmp_path: Path) -> None:
    store = tmp_path / "nats"
    store.mkdir(mode=0o700)
    (store / "nats-server.port").write_text("not a port\n")
    broker = EmbeddedNats(store)
    await broker.start()
    try:
        assert broker.port > 0
    finally:
        await broker.stop()
    assert (store / "nats-server.port").read_text() == f"{broker.port}\n"
