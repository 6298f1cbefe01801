"""Shared fixtures: real SQLite and PostgreSQL boards, a controllable clock, seats."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from cotal_tasks.core import Seat
from cotal_tasks.providers.board import BoardStore
from tests.support.clock import FakeClock

pytest_plugins = ("tests.support.trackers", "tests.support.lanes")

POSTGRES_ENV = "COTAL_TASKS_TEST_POSTGRES"
REQUIRE_POSTGRES_ENV = "COTAL_TASKS_REQUIRE_POSTGRES"


Clock = FakeClock  # the service's clock: called, it answers epoch milliseconds
CLOCK_START_S = 1_780_000_000


def seat(actor: str, n: int = 0, owner: str = "local") -> Seat:
    """A seat ``owner.actor`` whose lifecycle uid is derived from ``n``."""
    return Seat(owner, actor, f"{n:026d}")


@pytest.fixture
def clock() -> Clock:
    return FakeClock(CLOCK_START_S)


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The admin URL of the test PostgreSQL; skip (or fail under CI) without one."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get(REQUIRE_POSTGRES_ENV) == "1":
            pytest.fail(f"{POSTGRES_ENV} is not set, and {REQUIRE_POSTGRES_ENV}=1 requires it")
        pytest.skip(f"set {POSTGRES_ENV} to run the PostgreSQL tests")
    return url


@pytest.fixture
async def postgres_database(postgres_url: str) -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    async with fresh_database(postgres_url) as url:
        yield url


@asynccontextmanager
async def fresh_database(postgres_url: str) -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database, dropped on exit (a test that needs several)."""
    name = "ct_test_" + secrets.token_hex(6)
    dsn = _asyncpg_dsn(postgres_url)
    try:
        admin = await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        message = f"PostgreSQL at {POSTGRES_ENV} is not reachable: {exc}"
        if os.environ.get(REQUIRE_POSTGRES_ENV) == "1":
            pytest.fail(message)
        pytest.skip(message)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'board.db'}"


def backend_url(request: pytest.FixtureRequest, tmp_path: Path, file_name: str) -> str:
    """For a fixture parametrized ``["sqlite", "postgres"]``: a SQLite file ``file_name``
    under ``tmp_path``, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / file_name}"
    return str(request.getfixturevalue("postgres_database"))


# The two board backends a fixture is parametrised over; ``postgres`` is marked so, and
# ``-m "not postgres"`` deselects it.
BACKENDS = ("sqlite", pytest.param("postgres", marks=pytest.mark.postgres))


@pytest.fixture(params=BACKENDS)
def board_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A board URL on each backend: the one behaviour suite runs on both."""
    return backend_url(request, tmp_path, "board.db")


@pytest.fixture
async def board(board_url: str) -> AsyncIterator[BoardStore]:
    store = await BoardStore.open(board_url)
    try:
        yield store
    finally:
        await store.close()
