"""One database holds one endpoint's board.

A board's rows carry no endpoint, so two endpoints on one PostgreSQL database served one
board: a task created on ``com.acme.private`` was listed on ``com.acme.public``, and
per-endpoint grants no longer separated their readers. On SQLite the same set-up was
refused, but with "another process is serving", which sent the operator looking for a
process that did not exist. Now the first endpoint served from a database claims it, and
any other endpoint is refused at start and at ``check-config --online``, naming both and
the remedy (one config naming one database twice is refused before anything opens it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig
from cotal_tasks.bridge.wiring.endpoints import open_store
from cotal_tasks.core import ContractError

PRIVATE, PUBLIC = "com.acme.private", "com.acme.public"


def config(tmp: Path, name: str, database: str) -> BridgeConfig:
    return BridgeConfig(
        data_dir=tmp / name, endpoints=(EndpointConfig(name=name, database=database),)
    )


def _assert_names_both(exc: ContractError) -> None:
    assert exc.code == "failed-precondition"
    assert f"holds the board of endpoint {PRIVATE}" in exc.message
    assert f"endpoint {PUBLIC} cannot share it" in exc.message
    assert "a database of its own" in exc.message
    assert "another process" not in exc.message


async def _second_endpoint_refused(tmp: Path, database: str) -> None:
    first = config(tmp, PRIVATE, database)
    second = config(tmp, PUBLIC, database)
    board = await open_store(first, first.endpoints[0], serve=True)
    try:
        with pytest.raises(ContractError) as served:
            await open_store(second, second.endpoints[0], serve=True)
        _assert_names_both(served.value)
        # check-config --online opens it this way: no migration, no claim written
        with pytest.raises(ContractError) as checked:
            await open_store(second, second.endpoints[0], migrate=False)
        _assert_names_both(checked.value)
    finally:
        await board.close()
    # Claimed for good: the first endpoint stopped, the second is still refused.
    with pytest.raises(ContractError) as later:
        await open_store(second, second.endpoints[0], serve=True)
    _assert_names_both(later.value)
    again = await open_store(first, first.endpoints[0], serve=True)
    await again.close()


@pytest.mark.postgres
async def test_a_second_endpoint_on_one_postgres_database_is_refused(
    tmp_path: Path, postgres_database: str
) -> None:
    await _second_endpoint_refused(tmp_path, postgres_database)


async def test_a_second_endpoint_on_one_sqlite_file_is_told_why(tmp_path: Path) -> None:
    await _second_endpoint_refused(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}")


async def test_a_relative_sqlite_path_is_claimed_and_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --config team.toml`` from the config's folder gives a relative data_dir; the
    claim is read from that relative file (before: "relative path can't be expressed as a
    file URI" on the second start)."""
    monkeypatch.chdir(tmp_path)
    await _second_endpoint_refused(Path("."), "sqlite:///shared.db")
