"""``cotal-tasks serve`` under a low open-file limit (set in the child before it starts,
as ``ulimit -n`` would): the soft limit is raised to the hard one at start, and said so
with both numbers; and where the hard limit is low too, 300 idle sockets (from 100
loopback addresses) still leave ``/healthz`` and a signed webhook answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cotal_tasks.bridge.process.broker import free_port
from tests.providers.github._support import REPO, SECRET_ENV, TOKEN_ENV, WEBHOOK_SECRET
from tests.providers.hosted_support import add_issues
from tests.support.cli import Serving, serving
from tests.support.fake_github import (
    FakeGitHub,
    issues_payload,
    serve_fake_github,
    signed_webhook,
)
from tests.support.peers import hostile_peers
from tests.support.polling import eventually

IDLE = 300


@pytest.fixture
async def github(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FakeGitHub, str]]:
    """The fake GitHub on loopback, its token and the webhook secret exported."""
    fake = FakeGitHub()
    add_issues(fake, REPO, 3)
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    async with serve_fake_github(fake) as url:
        yield fake, url


def config_file(folder: Path, port: int, api_url: str) -> Path:
    config = folder / "bridge.toml"
    config.write_text(
        f'space = "local"\ndata_dir = "{folder}/data"\n[http]\nport = {port}\n'
        '[[endpoints]]\nname = "com.acme.board"\n'
        '[[endpoints]]\nname = "com.acme.github"\nprovider = "github"\n'
        f'[endpoints.github]\nrepository = "{REPO}"\napi_url = "{api_url}"\n'
        f'token_env = "{TOKEN_ENV}"\nwebhook_secret_env = "{SECRET_ENV}"\n'
        "reference_events = false\n",
        encoding="utf-8",
    )
    return config


def open_files_of(bridge: Serving) -> tuple[int, int]:
    """The serving process's (soft, hard) open-file limit, as the kernel reports it."""
    limits = Path(f"/proc/{bridge.process.pid}/limits").read_text(encoding="utf-8")
    line = next(row for row in limits.splitlines() if row.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


async def answered(fake: FakeGitHub, base: str) -> tuple[int, int]:
    """``/healthz`` and a signed ``issues`` delivery, each on a connection of its own."""
    body, headers = signed_webhook(
        WEBHOOK_SECRET, "issues", issues_payload(fake, "edited", REPO, 1)
    )
    async with httpx.AsyncClient(base_url=base, timeout=15) as http:
        health = await http.get("/healthz", headers={"Connection": "close"})
        hook = await http.post(
            "/webhooks/github", content=body, headers={**headers, "Connection": "close"}
        )
    return health.status_code, hook.status_code


async def test_the_soft_limit_is_raised_to_the_hard_one_at_start(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    """Before: the bridge kept the soft limit it was given, and took half of it for
    connections."""
    config = config_file(tmp_path, free_port(), github[1])
    async with serving(config, open_files=(256, 1024)) as bridge:
        assert open_files_of(bridge) == (1024, 1024)
    said = [line for line in bridge.stderr.decode().splitlines() if "open files" in line]
    assert len(said) == 1, said
    assert "from 256 to the hard limit, 1024" in said[0]


async def test_idle_sockets_past_a_low_limit_leave_probes_and_webhooks_answered(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    """Before: under ``RLIMIT_NOFILE`` 256, 300 idle sockets made ``/healthz`` 503 (every
    connection past 128 refused) until the head deadline cut them."""
    fake, api_url = github
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with serving(config_file(tmp_path, port, api_url), open_files=(256, 256)) as bridge:

        async def ready() -> bool:
            return (await answered(fake, base))[0] == 200

        await eventually(ready, within_s=20)  # the first sync is in
        with hostile_peers("127.0.0.1", port) as peers:
            await peers.idle(IDLE)
            await asyncio.sleep(0.5)
            for _ in range(5):
                assert await answered(fake, base) == (200, 202)
        assert open_files_of(bridge) == (256, 256)
    log = bridge.stderr.decode()
    assert "unable to open database file" not in log
    assert "Traceback" not in log
