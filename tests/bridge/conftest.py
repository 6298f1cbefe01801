"""Fixtures for the command-service tests: a service and a client over every kind of store.

``store`` is the in-memory store, the SQLite board and the PostgreSQL board in turn (the
service's two read paths: the models, and the board's stored wire form); ``client`` and
``service`` are over it. A test that reaches into the board's database asks for
``board_client`` (over ``board``, SQLite and PostgreSQL) instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cotal_tasks.bridge.service.commands import CommandService, ServiceSettings
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.memory import MemoryStore
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import Client, DictPresence, service_over
from tests.conftest import BACKENDS, Clock, backend_url


@pytest.fixture
def presence() -> DictPresence:
    return DictPresence()


@pytest.fixture(params=("memory", *BACKENDS))
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``memory``, or a board URL on each backend."""
    if request.param == "memory":
        return "memory"
    return backend_url(request, tmp_path, "board.db")


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[TaskStore]:
    """A fresh, empty store of each kind the service runs over."""
    opened: TaskStore
    if store_url == "memory":
        opened = MemoryStore()
    else:
        opened = await BoardStore.open(store_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def service(store: TaskStore, clock: Clock, presence: DictPresence) -> CommandService:
    return service_over(store, ServiceSettings(space="demo"), clock, presence)


@pytest.fixture
def client(service: CommandService, store: TaskStore) -> Client:
    return Client(service, store)


@pytest.fixture
def board_client(board: BoardStore, clock: Clock, presence: DictPresence) -> Client:
    """A client over the SQL board (``board``), for a test that reaches its database."""
    return Client(service_over(board, ServiceSettings(space="demo"), clock, presence), board)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test that asks for ``client`` or ``service`` (over ``store``) and ``board``
    (another store): it would read a board its calls never wrote."""
    here = Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue  # a hook of a conftest hears the whole session's items
        names = set(getattr(item, "fixturenames", ()))
        if "board" in names and names & {"client", "service"} and "board_client" not in names:
            raise pytest.UsageError(
                f"{item.nodeid} asks for client or service, which run over the store fixture, "
                "and for board, another store. Ask for store instead of board, or for "
                "board_client (a client over board)"
            )
