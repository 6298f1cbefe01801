"""A tower-do endpoint in the bridge: beside a board on the read API the dashboard reads,
followed by the file watcher (and by the poll where no watcher runs), and shown by
``check-config --preview`` from a TOML config."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig, HttpToken
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.bridge.wiring.process import running_bridge
from cotal_tasks.core import ContractError
from cotal_tasks.providers.tower_do import TowerDoConfig
from cotal_tasks.providers.tower_do.follow import Follower
from tests.providers.tower_do._support import agent_event, tower_of
from tests.support.cli import cli_output
from tests.support.polling import eventually

TOKEN_ENV = "CT_TOWER_DO_READER"
TOKEN = "reader-" + "t" * 40


@pytest.fixture
def board_file(tmp_path: Path) -> Path:
    path = tmp_path / "tower" / "board.jsonl"
    path.parent.mkdir()
    path.write_text(
        agent_event("gemm", "Speed up GEMM", "in_progress", "coder-1", 1000, owner="coder-1"),
        encoding="utf-8",
    )
    return path


async def test_the_read_api_serves_tower_do_beside_a_board(
    tmp_path: Path, board_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    config = BridgeConfig(
        data_dir=tmp_path / "bridge",
        http=HttpConfig(port=0, tokens=(HttpToken(token_env=TOKEN_ENV, principal="local.dash"),)),
        endpoints=(
            EndpointConfig(name="com.acme.tasks"),
            EndpointConfig(
                name="com.acme.agents",
                settings=TowerDoConfig(board=board_file, poll_interval_s=60),
            ),
        ),
    )
    async with running_bridge(config) as bridge:
        assert bridge.http_url is not None
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=bridge.http_url, headers=headers) as http:
            listed = (await http.get("/v1/endpoints")).json()["endpoints"]
            assert [(e["name"], e["provider"]) for e in listed] == [
                ("com.acme.tasks", "board"),
                ("com.acme.agents", "tower-do"),
            ]
            board = (await http.get("/v1/endpoints/com.acme.agents/board")).json()
            assert [(t["taskId"], t["statusSource"]) for t in board["tasks"]] == [
                ("gemm", "in_progress")
            ]
            with board_file.open("a", encoding="utf-8") as handle:  # an agent writes
                handle.write(agent_event("docs", "Write docs", "pending", "main", 2000))

            async def shown() -> bool:
                page = (await http.get("/v1/endpoints/com.acme.agents/tasks")).json()
                return {t["taskId"] for t in page["tasks"]} == {"gemm", "docs"}

            # The poll is a minute away: the file watcher is what wakes the refresh.
            await eventually(shown, within_s=20)
            health = (await http.get("/healthz")).json()["endpoints"]["com.acme.agents"]
            assert (health["provider"], health["ready"]) == ("tower-do", True)


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[tuple[Path, Follower]]:
    # The board's directory does not exist yet: no watcher can start, only the poll runs.
    path = tmp_path / "later" / "board.jsonl"
    endpoint = EndpointConfig(settings=TowerDoConfig(board=path, poll_interval_s=0.05))
    config = BridgeConfig(
        data_dir=tmp_path / "data", http=HttpConfig(enabled=False), endpoints=(endpoint,)
    )
    async with open_endpoint(config, endpoint, serve=True) as ep:
        yield path, tower_of(ep).follower


async def test_the_poll_follows_where_no_watcher_runs(opened: tuple[Path, Follower]) -> None:
    path, follower = opened
    stop = asyncio.Event()
    task = asyncio.create_task(follower.run(stop))
    try:
        path.parent.mkdir()
        path.write_text(agent_event("late", "Late", "pending", "main", 3000), encoding="utf-8")
        store = follower.store

        async def mirrored() -> bool:
            try:
                await store.get("late")
            except ContractError:
                return False
            return True

        await eventually(mirrored, within_s=20)
    finally:
        stop.set()
        await task


async def test_check_config_preview_shows_the_board(tmp_path: Path, board_file: Path) -> None:
    config = tmp_path / "tasks.toml"
    config.write_text(
        f"""space = "demo"
data_dir = "{tmp_path / "data"}"

[[endpoints]]
name = "com.acme.agents"
provider = "tower-do"

[endpoints.tower_do]
board = "{board_file}"
seats = {{ "coder-1" = "local.worker" }}
""",
        encoding="utf-8",
    )
    before = board_file.read_bytes()
    text = await cli_output(config, "check-config", "--preview", "5")
    assert f"tower-do board {board_file}, 1 seats" in text
    assert "gemm: Speed up GEMM" in text
    # No seat is present to give a lifecycle uid, so the invariant says open.
    assert "status open (statusSource 'in_progress'), unbound" in text
    assert board_file.read_bytes() == before  # nothing written
    assert json.loads(before)["key"] == "gemm"
    # `sync` folds the board into the mirror once, with the bridge stopped.
    synced = await cli_output(config, "sync")
    assert synced.strip() == f"com.acme.agents: caught up with {board_file}"
    assert board_file.read_bytes() == before
