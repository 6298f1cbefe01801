"""Every CLI command against every failure an operator meets in the first hour: one line,
``cotal-tasks: <what>. <what to do>``, on stderr, a documented exit status, and no
traceback (only ``--debug`` shows one). Real subprocesses of the installed command, a
fake GitHub on loopback, a closed port for an absent broker or database, a port taken."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.fake_github import FakeGitHub, serve_fake_github

REPO = "octo-org/hello-world"
TOKEN_ENV = "COTAL_TASKS_TEST_FAILURE_TOKEN"


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
async def github_url() -> AsyncIterator[str]:
    async with serve_fake_github(FakeGitHub()) as url:
        yield url


def config(
    tmp: Path,
    *,
    nats: str | None = None,
    database: str | None = None,
    github: str | None = None,
    repository: str = REPO,
    http_port: int | None = None,
) -> Path:
    lines = ['space = "demo"', f'data_dir = "{tmp / "data"}"', "nats_connect_timeout_s = 2"]
    if nats is not None:
        lines.append(f'nats_url = "{nats}"')
    lines += ["[http]", f"port = {http_port}" if http_port is not None else "enabled = false"]
    lines += ["[[endpoints]]", 'name = "com.acme.tasks"']
    if database is not None:
        lines.append(f'database = "{database}"')
    if github is not None:
        lines += [
            'provider = "github"',
            "[endpoints.github]",
            f'repository = "{repository}"',
            f'api_url = "{github}"',
            f'token_env = "{TOKEN_ENV}"',
        ]
    path = tmp / "tasks.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SEAT = "--as=local.builder/01j9builder000000000000000"
# (subcommand and its arguments, the failure, the exit status, what the line must say)
LOG_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")
CASES = [
    (["describe", SEAT], "no-broker", 1, "Check nats_url"),
    (["invoke", "list-tasks", SEAT], "no-broker", 1, "Check nats_url"),
    (["serve"], "no-broker", 1, "Check nats_url"),
    (["invoke", "list-tasks", SEAT, "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    (["describe", SEAT, "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    (["history", "t-1", "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    (["sync", "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    (["grants", "--serve", "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    (["history", "t-1"], "no-database", 1, "database"),
    (["serve"], "no-database", 1, "database"),
    (["sync"], "wrong-token", 1, "token_env"),
    (["check-config", "--preview", "3"], "wrong-token", 1, "token_env"),
    (["sync"], "missing-repository", 1, "Check repository"),
    (["check-config", "--preview", "3"], "missing-repository", 1, "Check repository"),
    (["serve"], "port-in-use", 1, "[http] port"),
    (["mcp", SEAT], "no-broker", 1, "The URL is nats_url in"),
    (["mcp", SEAT, "--endpoint", "nope"], "unknown-endpoint", 2, "Name one"),
    # conformance and completion read no config: their arguments say it all
    (
        ["conformance", "--nats", "{nats}", "--space", "demo", "--endpoint", "x"],
        "no-broker",
        2,
        "Check --nats",
    ),
    (["completion", "tcsh"], "bad-shell", 2, "Give bash, zsh or fish"),
]
NO_CONFIG = ("conformance", "completion")


@pytest.mark.parametrize(
    ("args", "failure", "status", "remedy"),
    CASES,
    ids=[f"{args[0]}-{failure}" for args, failure, _, _ in CASES],
)
async def test_each_command_answers_each_failure_in_one_line(
    args: list[str],
    failure: str,
    status: int,
    remedy: str,
    tmp_path: Path,
    closed_port: int,
    taken_port: int,
    github_url: str,
) -> None:
    env = {**os.environ, TOKEN_ENV: FakeGitHub().token}
    nats = (
        None if args[0] == "serve" and failure != "no-broker" else f"nats://127.0.0.1:{closed_port}"
    )
    options: dict[str, object] = {"nats": nats}
    if failure == "no-database":
        options["database"] = f"postgresql://postgres@127.0.0.1:{closed_port}/board"
        options["nats"] = None
    elif failure == "wrong-token":
        options["github"] = github_url
        env[TOKEN_ENV] = "ghp_wrong000000000000000000000000000000000"
    elif failure == "missing-repository":
        options["github"] = github_url
        options["repository"] = "octo-org/no-such-repository"
    elif failure == "port-in-use":
        options["http_port"] = taken_port
    path = config(tmp_path, **options)  # type: ignore[arg-type]
    given = [arg.replace("{nats}", f"nats://127.0.0.1:{closed_port}") for arg in args]
    if args[0] not in NO_CONFIG:
        given += ["--config", str(path)]

    code, out, err = await run(*given, env=env)

    assert code == status, (out, err)
    assert "Traceback" not in out + err
    # serve logs its start-up (log records: a time stamp first) before the line; every
    # other command prints only the line
    lines = err.strip().splitlines()
    if args[0] == "serve":
        lines = [line for line in lines if not LOG_RECORD.match(line)]
    assert len(lines) == 1, err
    assert lines[0].startswith("cotal-tasks: "), err
    assert remedy in lines[0], err
    assert "alembic" not in err  # the libraries are quiet unless asked
    assert "ghp_wrong" not in out + err


async def test_debug_shows_the_traceback(tmp_path: Path, closed_port: int) -> None:
    path = config(tmp_path, nats=f"nats://127.0.0.1:{closed_port}")
    code, _, err = await run("--debug", "describe", SEAT, "--config", str(path))
    assert code != 0
    assert "Traceback" in err
