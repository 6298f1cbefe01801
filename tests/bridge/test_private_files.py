"""What the bridge keeps in its data directory is its user's alone: a real embedded
bridge (its own nats-server, a SQLite board written to), under the usual umask 022."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring.process import running_bridge
from tests.bridge._support import Client
from tests.conftest import seat

OPERATOR = seat("operator", 9)


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


async def test_the_data_directory_and_what_the_bridge_creates_are_private(
    tmp_path: Path,
) -> None:
    """Before: data dir 0755; databases, WAL, instance and broker files 0644."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # an operator made it beforehand, world-readable
    config = BridgeConfig(
        data_dir=data,
        http=HttpConfig(port=0),
        endpoints=(EndpointConfig(name="com.acme.tasks"),),
    )
    old = os.umask(0o022)
    try:
        async with running_bridge(config) as bridge:
            endpoint = bridge.endpoints[0]
            await Client(endpoint.service, endpoint.store).call(
                "create-task", OPERATOR, {"title": "Written, so the WAL exists"}
            )
            seen = modes(data)
    finally:
        os.umask(old)
    names = set(seen)
    for expected in (
        "com_acme_tasks.db",
        "com_acme_tasks.db-wal",
        "com_acme_tasks.instance.json",
        "nats.url",
        "nats/nats-server.log",
        "nats/nats-server.pid",
    ):
        assert expected in names, sorted(names)
    assert any(name.startswith("nats/jetstream/") for name in names)
    wide = {name: oct(mode) for name, mode in seen.items() if mode & 0o077}
    assert wide == {}
    assert seen["."] == 0o700
