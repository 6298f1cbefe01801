"""``examples/client_example.py`` runs as documented against a real bridge."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.client.conftest import Board
from tests.support.bridge import ENDPOINT, SPACE

EXAMPLE = Path(__file__).parents[2] / "examples" / "client_example.py"


async def test_the_client_example_runs(board: Board) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        *("--nats", board.url, "--space", SPACE, "--endpoint", ENDPOINT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    text = out.decode()
    assert "claimed by local.example/" in text
    assert "done, evidence ['examples/client_example.py']" in text
    assert "refused as expected: bad-request (not-executed)" in text
    page = await board.client("reader").list_tasks(status="done")
    assert [t.title for t in page.tasks] == ["Try the typed client"]
    assert "Try the typed client" in text
