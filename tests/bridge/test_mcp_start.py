"""``cotal-tasks mcp`` starts light: an agent host spawns it at every session start, so
reaching the command imports neither the bridge's providers, database libraries and HTTP
stack, nor the config (given ``--nats``, ``--space`` and ``--endpoint``)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "httpx",
    "uvicorn",
    "starlette",
    "cotal_tasks.bridge.config",
    "cotal_tasks.bridge.wiring",
    "cotal_tasks.providers",
)
PROBE = """
import sys
from click.testing import CliRunner
from cotal_tasks.bridge.cli.main import main
import cotal_tasks.bridge.cli.agent as agent

seen = {}
def fake_run(work):
    seen["work"] = work  # stop before connecting: the imports so far are the start's
agent_run = __import__("cotal_tasks.bridge.cli.options", fromlist=["run"])
agent_run.run = fake_run
result = CliRunner().invoke(main, ["mcp", "--as", "local.agent/" + "0" * 26,
    "--nats", "nats://127.0.0.1:1", "--space", "s", "--endpoint", "com.example.tasks"])
assert result.exit_code == 0, result.output
assert "work" in seen
heavy = sys.argv[1:]
print(" ".join(m for m in heavy if any(k == m or k.startswith(m + ".") for k in sys.modules)))
"""


def test_the_mcp_command_imports_nothing_it_does_not_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_the_group_still_lists_every_command() -> None:
    from click.testing import CliRunner

    from cotal_tasks.bridge.cli.main import main

    listed = CliRunner().invoke(main, ["--help"]).output
    for name in ("serve", "describe", "invoke", "mcp", "grants", "check-config", "sync"):
        assert f"  {name} " in listed
    assert "history" in listed
    assert "conformance" in listed
