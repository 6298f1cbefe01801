"""A fast CLI: ``--help``, ``--version``, ``invoke`` and ``describe`` load only what they use
(no provider, no database or HTTP library), checked in a fresh interpreter per command.
``make bench`` (part ``cli``) measures the time beside ``python -c "import click"``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "sqlalchemy",
    "alembic",
    "httpx",
    "uvicorn",
    "starlette",
    "mcp",
    "cotal_tasks.providers.registry",
    "cotal_tasks.providers.board",
    "cotal_tasks.providers.github",
)
PROBE = f"""
import atexit, sys
HEAVY = {HEAVY!r}
atexit.register(lambda: print("LOADED=" + ",".join(m for m in HEAVY if m in sys.modules),
                              file=sys.stderr))
from cotal_tasks.bridge.cli.main import main
main(sys.argv[1:], prog_name="cotal-tasks")
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with socket.socket() as sock:  # a broker that is not there: the call fails fast
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path_factory.mktemp("cli") / "tasks.toml"
    path.write_text(
        f'space = "demo"\nnats_url = "nats://127.0.0.1:{port}"\n'
        '[[endpoints]]\nname = "com.acme.gh"\nprovider = "github"\n'
        '[endpoints.github]\nrepository = "a/b"\ntoken_env = "UNSET"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["invoke", "list-tasks"], ["describe"], ["invoke", "--help"]],
    ids=lambda args: " ".join(args),
)
def test_the_command_loads_no_provider_and_no_server_library(args: list[str], config: Path) -> None:
    if args[0] in ("invoke", "describe") and "--help" not in args:
        args = [*args, "--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("LOADED=")]
    assert line == "LOADED=", line  # before: every provider, SQLAlchemy, httpx, alembic …
    assert "Traceback" not in done.stderr


# (the words typed before TAB, a completion that must be offered)
COMPLETIONS = [
    ("cotal-tasks ", "plain,check-config"),
    ("cotal-tasks che", "plain,check-config"),
    ("cotal-tasks invoke ", "plain,claim-task"),
    ("cotal-tasks invoke list", "plain,list-tasks"),
    ("cotal-tasks serve --", "plain,--config"),
    ("cotal-tasks check-config --", "plain,--online"),
    ("cotal-tasks history --", "plain,--endpoint"),
    ("cotal-tasks sync --", "plain,--endpoint"),
    ("cotal-tasks grants --", "plain,--capability"),
]


@pytest.mark.parametrize(("words", "offered"), COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
def test_shell_completion_is_light_and_completes_command_names(words: str, offered: str) -> None:
    """A TAB imports no provider, database or HTTP library (before: 1.3-1.5 s per TAB, the
    whole bridge imported to list the command names) and, after ``invoke``, offers the
    contract's commands (before: nothing)."""
    typed = words.split()
    env = {
        **os.environ,
        "_COTAL_TASKS_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(typed) if words.endswith(" ") else len(typed) - 1),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=env
    )
    assert offered in done.stdout.splitlines(), done.stdout
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("LOADED=")]
    assert line == "LOADED=", line
