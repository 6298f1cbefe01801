"""The ``board`` fixture: a tower-do board file served as an endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.tower_do._support import Board, open_board


@pytest.fixture
async def board(tmp_path: Path) -> AsyncIterator[Board]:
    async with open_board(tmp_path) as opened:
        yield opened
