"""A SQLite board's first migration applies whole or not at all, one migrator at a time."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Connection

from cotal_tasks.core import ContractError
from cotal_tasks.providers.board import BoardStore, migrate


def board_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return sorted(name for (name,) in rows)


async def test_a_migration_stopped_half_way_leaves_no_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_upgrade = migrate.upgrade

    def upgrade_then_fail(connection: Connection) -> None:
        real_upgrade(connection)  # every table created, then the process "dies"
        raise ConnectionResetError("the bridge stopped before its migration committed")

    monkeypatch.setattr(migrate, "upgrade", upgrade_then_fail)
    path = tmp_path / "board.db"
    with pytest.raises((ContractError, ConnectionResetError)):
        await BoardStore.open(f"sqlite:///{path}")
    assert board_tables(path) == []  # before: every table, and no version to say so

    monkeypatch.setattr(migrate, "upgrade", real_upgrade)
    store = await BoardStore.open(f"sqlite:///{path}")  # so the next start migrates cleanly
    try:
        assert "ct_alembic_version" in board_tables(path)
    finally:
        await store.close()


OPEN_ONE = """
import asyncio, sys
from cotal_tasks.providers.board import BoardStore

async def main() -> None:
    store = await BoardStore.open("sqlite:///" + sys.argv[1])
    await store.close()

asyncio.run(main())
"""


def test_bridges_starting_together_on_a_new_board_all_start(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_ONE, str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    failures = []
    for start in starts:
        _, err = start.communicate(timeout=120)
        if start.returncode != 0:
            failures.append(err.decode(errors="replace")[-400:])
    assert failures == []
    assert "ct_alembic_version" in board_tables(path)
