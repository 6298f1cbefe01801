"""The board file against what an agent may commit: a link is refused, for reads and
appends, with a message; a board the bridge creates is 0600; a line over the bound is
skipped and counted once, never read again. Real files under a real endpoint."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.tower_do import TowerDoConfig
from cotal_tasks.providers.tower_do.boardfile import MAX_LINE_BYTES, BoardFile
from cotal_tasks.providers.tower_do.folder import NotARegularFile
from tests.bridge._support import Client, DictPresence
from tests.conftest import seat
from tests.providers.tower_do._support import agent_event

READER = seat("reader", 3)
SCRIPT = "#!/bin/sh\necho hello\n"


@pytest.fixture
async def linked(tmp_path: Path) -> AsyncIterator[tuple[Path, Path, Client]]:
    """A board path that is a link to a shell script, and the endpoint over it."""
    script = tmp_path / "deploy.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    board = tmp_path / "project" / ".pi" / "tower-do" / "board.jsonl"
    board.parent.mkdir(parents=True)
    board.symlink_to(script)
    endpoint = EndpointConfig(settings=TowerDoConfig(board=board))
    config = BridgeConfig(
        data_dir=tmp_path / "data", http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    async with open_endpoint(config, endpoint, DictPresence(), serve=True) as opened:
        yield board, script, Client(opened.service, opened.store)


async def test_a_board_that_is_a_link_is_neither_read_nor_written(
    linked: tuple[Path, Path, Client],
) -> None:
    """Before: a committed ``board.jsonl`` link to a shell script got a task title
    appended to it, which then ran."""
    board, script, client = linked
    with pytest.raises(NotARegularFile):
        BoardFile(board).refresh()
    with pytest.raises(ContractError) as caught:
        await client.call("create-task", READER, {"title": "echo pwned"})
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert caught.value.outcome == "not-executed"
    assert "symbolic link" in caught.value.message
    assert "Point the endpoint's board at the file itself" in caught.value.message
    assert script.read_text(encoding="utf-8") == SCRIPT  # nothing appended through it


async def test_a_board_the_bridge_creates_is_private(tmp_path: Path) -> None:
    """Before: created 0644 under umask 022."""
    board = tmp_path / "project" / "board.jsonl"
    board.parent.mkdir()
    endpoint = EndpointConfig(settings=TowerDoConfig(board=board))
    config = BridgeConfig(
        data_dir=tmp_path / "data", http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    old = os.umask(0o022)
    try:
        async with open_endpoint(config, endpoint, DictPresence(), serve=True) as opened:
            await Client(opened.service, opened.store).call(
                "create-task", READER, {"title": "Port the parser"}
            )
    finally:
        os.umask(old)
    assert stat.S_IMODE(board.stat().st_mode) == 0o600


def test_a_line_over_the_bound_is_skipped_once_and_never_read_again(tmp_path: Path) -> None:
    """Before: an unterminated 200 MiB line was read again on every poll (and a long
    terminated one was held whole in memory)."""
    path = tmp_path / "board.jsonl"
    path.write_bytes(
        agent_event("a", "First", "pending", "main", 1000).encode()
        + b'{"kind":"task","pad":"'
        + b"x" * (MAX_LINE_BYTES + 10)
        + b'"}\n'
        + agent_event("b", "Second", "pending", "main", 1001).encode()
        + b"y" * (3 * MAX_LINE_BYTES)  # unterminated, still growing
    )
    board = BoardFile(path)
    assert board.refresh()
    assert set(board.fold.tasks) == {"a", "b"}
    assert board.long_lines == 2
    assert board.offset == path.stat().st_size  # past the unterminated one too

    with path.open("ab") as handle:  # the long line ends; a new event follows
        handle.write(b"yyy\n" + agent_event("c", "Third", "pending", "main", 1002).encode())
    size_before = board.offset
    assert board.refresh()
    assert set(board.fold.tasks) == {"a", "b", "c"}
    assert board.long_lines == 2  # counted once, not again
    assert board.offset == path.stat().st_size
    assert board.offset - size_before < 1024  # only the new bytes were read
