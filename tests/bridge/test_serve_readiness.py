"""``cotal-tasks serve`` (a real subprocess, embedded nats-server) against a fake GitHub on
loopback that refuses it for good: the endpoint is not ready on ``/healthz``, with the
reason, and the refusal is logged once, not once per poll."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import httpx
import pytest

from tests.support.cli import CLI
from tests.support.fake_github import FakeGitHub, serve_fake_github
from tests.support.polling import eventually

TOKEN_ENV = "COTAL_TASKS_TEST_READINESS_TOKEN"
ENDPOINT = "com.acme.github"


@pytest.mark.parametrize(("refusal", "status"), [("wrong-token", 401), ("missing-repository", 404)])
async def test_a_permanent_refusal_makes_the_endpoint_not_ready(
    tmp_path: Path, refusal: str, status: int
) -> None:
    fake = FakeGitHub()
    token = "ghp_wrong000000000000000000000000000000000" if refusal == "wrong-token" else fake.token
    repository = "octo-org/hello-world" if refusal == "wrong-token" else "octo-org/absent"
    async with serve_fake_github(fake) as api_url:
        config = tmp_path / "tasks.toml"
        config.write_text(
            f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n'
            "[http]\nport = 0\nlocal_reader = true\n"
            f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "github"\n'
            f'[endpoints.github]\nrepository = "{repository}"\napi_url = "{api_url}"\n'
            f'token_env = "{TOKEN_ENV}"\npoll_interval_s = 0.3\n',
            encoding="utf-8",
        )
        process = await asyncio.create_subprocess_exec(
            str(CLI), "serve", "--config", str(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, TOKEN_ENV: token},
        )  # fmt: skip
        try:
            url = await dashboard_url(process)
            async with httpx.AsyncClient(base_url=url) as http:

                async def refused() -> bool:
                    answer = await http.get("/healthz")
                    return answer.status_code == 503

                await eventually(refused, 20, what="the endpoint not ready")
                body = (await http.get("/healthz")).json()
                entry = body["endpoints"][ENDPOINT]
                assert entry["ready"] is False
                assert str(status) in entry["notReady"]
                polls = len(fake.requests)
                await eventually(lambda: len(fake.requests) >= polls + 3, 20, what="more polls")
                scraped = (await http.get("/metrics")).text
                assert f'cotal_tasks_ready{{endpoint="{ENDPOINT}"}} 0.0' in scraped
                assert f'cotal_tasks_stale{{endpoint="{ENDPOINT}"}} 1.0' in scraped
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 30)
    log = err.decode()
    assert log.count("sync refused for good") == 1, log  # before: a warning every poll
    assert "Traceback" not in log
    assert "httpx" not in log  # no request logged at info


async def test_metrics_an_operator_alerts_on(tmp_path: Path) -> None:
    """A bridge that syncs: build info, the last successful sync, not stale, leader, ready."""
    fake = FakeGitHub()
    fake.add_issue("octo-org/hello-world", "First")
    async with serve_fake_github(fake) as api_url:
        config = tmp_path / "tasks.toml"
        config.write_text(
            f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n'
            "[http]\nport = 0\nlocal_reader = true\n"
            f'[[endpoints]]\nname = "{ENDPOINT}"\nprovider = "github"\n'
            f'[endpoints.github]\nrepository = "octo-org/hello-world"\napi_url = "{api_url}"\n'
            f'token_env = "{TOKEN_ENV}"\n',
            encoding="utf-8",
        )
        process = await asyncio.create_subprocess_exec(
            str(CLI), "serve", "--config", str(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, TOKEN_ENV: fake.token},
        )  # fmt: skip
        try:
            url = await dashboard_url(process)
            async with httpx.AsyncClient(base_url=url) as http:

                async def synced() -> bool:
                    entry = (await http.get("/healthz")).json()["endpoints"][ENDPOINT]
                    return "lastSync" in entry

                await eventually(synced, 20, what="the first sync")
                scraped = (await http.get("/metrics")).text
        finally:
            process.send_signal(signal.SIGTERM)
            rest, _ = await asyncio.wait_for(process.communicate(), 30)
    assert b"Walkthrough" not in rest  # the board's walkthrough is not a GitHub endpoint's
    assert re.search(r'cotal_tasks_build_info\{version="[^"]+"\} 1\.0', scraped)  # before: none
    last = re.search(
        rf'cotal_tasks_sync_last_success_timestamp_seconds\{{endpoint="{ENDPOINT}"\}} (\S+)',
        scraped,
    )
    assert last is not None
    assert float(last.group(1)) > 1.7e9
    assert f'cotal_tasks_stale{{endpoint="{ENDPOINT}"}} 0.0' in scraped
    assert f'cotal_tasks_sync_leader{{endpoint="{ENDPOINT}"}} 1.0' in scraped
    assert f'cotal_tasks_ready{{endpoint="{ENDPOINT}"}} 1.0' in scraped


async def dashboard_url(process: asyncio.subprocess.Process) -> str:
    """The base URL ``serve`` announces for its dashboard."""
    assert process.stdout is not None
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert line, "serve ended before it announced its dashboard"
        found = re.search(r"Dashboard: (http://\S+?)/ ", line)
        if found:
            return found.group(1)
