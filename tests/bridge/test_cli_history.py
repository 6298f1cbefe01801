"""``history``, ``sync`` and ``check-config --preview`` on a config with a board first and a
GitHub endpoint after it (real subprocesses, a fake GitHub on loopback): ``history`` of a
tracker's task reads the mirror without the tracker's token, and without ``--endpoint`` its
not-found names the endpoint that has the task; ``sync`` and ``--preview`` take the only
tracker endpoint, and a board named to them is refused with the endpoints they can take."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.fake_github import FakeGitHub, serve_fake_github

TOKEN_ENV = "COTAL_TASKS_TEST_HISTORY_TOKEN"
REPO = "octo-org/hello-world"


@pytest.fixture
async def github() -> AsyncIterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()
    async with serve_fake_github(fake) as url:
        yield fake, url


async def test_history_reads_the_mirror_and_names_the_endpoint_that_has_the_task(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    fake, url = github
    fake.bulk_issues(REPO, 3)
    config = tmp_path / "team.toml"
    config.write_text(
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n[http]\nenabled = false\n'
        '[[endpoints]]\nname = "com.acme.board"\n'
        '[[endpoints]]\nname = "com.acme.gh"\nprovider = "github"\n[endpoints.github]\n'
        f'repository = "{REPO}"\napi_url = "{url}"\ntoken_env = "{TOKEN_ENV}"\n',
        encoding="utf-8",
    )
    with_token = {**os.environ, TOKEN_ENV: fake.token}
    without = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}

    # sync takes the only tracker endpoint (before: the first endpoint, the board, refused)
    code, out, err = await run("sync", "--config", str(config), env=with_token)
    assert code == 0, (out, err)
    assert "com.acme.gh: synced" in out
    code, out, err = await run(
        "check-config", "--preview", "1", "--config", str(config), env=with_token
    )
    assert code == 0, (out, err)
    assert "preview of com.acme.gh" in out
    # a board named to them: refused, listing the endpoints they can take
    for args in (("sync",), ("check-config", "--preview", "1")):
        code, out, err = await run(
            *args, "--endpoint", "com.acme.board", "--config", str(config), env=with_token
        )
        assert code == 2, (args, out, err)
        assert "Name one with --endpoint: com.acme.gh" in err

    task_id = f"{REPO}#1"
    # the mirror, without the token (before: "GITHUB_TOKEN … is not set")
    code, out, err = await run(
        "history", task_id, "--endpoint", "com.acme.gh", "--json", "--config", str(config),
        env=without,
    )  # fmt: skip
    assert code == 0, (out, err)
    assert json.loads(out)["taskId"] == task_id
    # without --endpoint: the board has no such task, and the refusal names who has it
    # (before: "no task … on this board", and no hint)
    code, out, err = await run("history", task_id, "--config", str(config), env=without)
    assert code == 2, (out, err)
    assert "endpoint com.acme.gh has it. Give --endpoint com.acme.gh" in err
    code, out, err = await run("history", "t-nope", "--config", str(config), env=without)
    assert code == 2
    assert "no task 't-nope'" in err
