"""A provider's build is handed a ``Mirror`` (the port plus ``get_many``/``commit_many``),
never the board's class: tower-do runs over the in-memory store as over the board; the
hosted machinery, whose write ledger lives in the mirror's database, refuses a mirror that
has none, naming the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers import tower_do
from cotal_tasks.providers.memory import MemoryStore
from cotal_tasks.providers.provider import BuildContext
from cotal_tasks.providers.registry import provider
from cotal_tasks.providers.store import PageQuery
from tests.conftest import Clock
from tests.providers.conftest import HARNESS_TOKEN_ENV, _endpoint
from tests.providers.tower_do._support import agent_event


async def test_a_tower_do_board_mirrors_into_the_in_memory_store(
    tmp_path: Path, clock: Clock
) -> None:
    board = tmp_path / "board.jsonl"
    board.write_text(agent_event("ship", "Ship it", "pending", "coder-1", 1_000), encoding="utf-8")
    mirror = MemoryStore()
    config = tower_do.TowerDoConfig(board=board, poll_interval_s=60)
    built = await tower_do.build(config, BuildContext("com.acme.agents", "demo", mirror, clock))
    try:
        page = await built.store.page(PageQuery(limit=10))
        assert [task.title for task in page.tasks] == ["Ship it"]
        assert await mirror.change_seq() == 1  # the fold landed in the mirror it was handed
        assert built.on_change is not None
        assert built.catch_up is not None
        report = await built.catch_up(None)
        assert report.lines == (f"caught up with {board}",)
    finally:
        await built.close()
        await built.store.close()


async def test_a_hosted_tracker_refuses_a_mirror_without_a_database(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HARNESS_TOKEN_ENV, "t0ken-for-the-test")
    endpoint = _endpoint("github", "http://127.0.0.1:9")
    context = BuildContext(endpoint.name, "demo", MemoryStore(), clock)
    with pytest.raises(ContractError) as caught:
        await provider("github").build(endpoint.settings, context)
    assert caught.value.code is ErrorCode.FAILED_PRECONDITION
    assert "SQLite or PostgreSQL database" in caught.value.message
