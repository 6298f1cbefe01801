"""Fixtures for the command-service tests: a service and a client over the real board."""

from __future__ import annotations

import pytest

from cotal_tasks.bridge.service.commands import CommandService, ServiceSettings
from cotal_tasks.providers.board import BoardStore
from tests.bridge._support import Client, DictPresence
from tests.conftest import Clock


@pytest.fixture
def presence() -> DictPresence:
    return DictPresence()


@pytest.fixture
def service(board: BoardStore, clock: Clock, presence: DictPresence) -> CommandService:
    return CommandService(
        store=board, settings=ServiceSettings(space="demo"), clock=clock, presence=presence
    )


@pytest.fixture
def client(service: CommandService, board: BoardStore) -> Client:
    return Client(service, board)
