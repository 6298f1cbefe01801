"""``cotal-tasks check-config`` refuses what ``serve`` refuses (real subprocesses of both),
answers an unknown key with the nearest valid one, masks a database password in every
output, and with ``--online`` connects to a real nats-server, a real PostgreSQL and a fake
GitHub on loopback, reporting each."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.support.bridge import broker
from tests.support.cli import run
from tests.support.fake_github import FakeGitHub, serve_fake_github
from tests.support.fake_gitlab import FakeGitLab
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT as JIRA_PROJECT
from tests.support.fake_tracker import serve_on_loopback

TOKEN_ENV = "COTAL_TASKS_TEST_CHECK_TOKEN"
UNSET_ENV = "COTAL_TASKS_TEST_NEVER_SET"
PASSWORD = "s3cretPassw0rd"


def write(tmp: Path, body: str) -> Path:
    path = tmp / "tasks.toml"
    path.write_text(
        f'space = "demo"\ndata_dir = "{tmp / "data"}"\n[http]\nenabled = false\n{body}',
        encoding="utf-8",
    )
    return path


GITHUB = '[[endpoints]]\nname = "com.acme.gh"\nprovider = "github"\n[endpoints.github]\n'
# (case, config body after [http], what the one refusal must say)
REFUSED = [
    ("unset-token-env", f'{GITHUB}repository = "a/b"\ntoken_env = "{UNSET_ENV}"\n', UNSET_ENV),
    (
        "postgres-scheme",
        '[[endpoints]]\nname = "com.acme.tasks"\ndatabase = "postgres://u@127.0.0.1/x"\n',
        "not 'postgres'",
    ),
    ("nats-port", "", "is not a broker URL"),
    (
        "shared-database",
        '[[endpoints]]\nname = "com.acme.private"\ndatabase = "sqlite:///shared.db"\n'
        '[[endpoints]]\nname = "com.acme.public"\ndatabase = "sqlite:///./shared.db"\n',
        "endpoints com.acme.private and com.acme.public name one database",
    ),
    (
        "typo",
        '[[endpoints]]\nname = "com.acme.tasks"\ndatabse = "sqlite:///x.db"\n',
        "did you mean database?",
    ),
]


@pytest.mark.parametrize(("case", "body", "says"), REFUSED, ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("command", ["check-config", "serve"])
async def test_check_config_refuses_what_serve_refuses(
    tmp_path: Path, case: str, body: str, says: str, command: str
) -> None:
    if case == "nats-port":
        body = 'nats_url = "nats://127.0.0.1:4222x"\n'  # top level: before [http]
        path = tmp_path / "tasks.toml"
        path.write_text(f'space = "demo"\n{body}', encoding="utf-8")
    else:
        path = write(tmp_path, body)
    env = {k: v for k, v in os.environ.items() if k != UNSET_ENV}
    code, out, err = await run(command, "--config", str(path), env=env)
    assert code == 2, (out, err)  # before: check-config passed every one of these
    assert says in err
    assert "Tuple should have" not in err
    assert "Traceback" not in err


@pytest.fixture
async def github_url() -> AsyncIterator[str]:
    async with serve_fake_github(FakeGitHub()) as url:
        yield url


@pytest.mark.postgres
async def test_online_checks_each_connection_and_masks_the_password(
    tmp_path: Path, postgres_database: str, github_url: str
) -> None:
    database = make_url(postgres_database).set(password=PASSWORD)
    url = database.render_as_string(hide_password=False)
    env = {**os.environ, TOKEN_ENV: FakeGitHub().token}
    async with broker(tmp_path) as nats:
        body = (
            f'[[endpoints]]\nname = "com.acme.tasks"\ndatabase = "{url}"\n'
            f'{GITHUB}repository = "octo-org/hello-world"\napi_url = "{github_url}"\n'
            f'token_env = "{TOKEN_ENV}"\n'
        )
        path = write(tmp_path, body)
        text = path.read_text(encoding="utf-8")
        path.write_text(f'nats_url = "{nats.url}"\n{text}', encoding="utf-8")
        code, out, err = await run("check-config", "--online", "--config", str(path), env=env)
        jcode, jout, _ = await run(
            "check-config", "--online", "--json", "--config", str(path), env=env
        )
        scode, sout, serr = await run(
            "sync", "--endpoint", "com.acme.gh", "--json", "--config", str(path), env=env
        )
    assert code == 0, (out, err)
    assert PASSWORD not in out + err + jout  # before: printed as given
    assert "postgresql://***@" in out
    assert out.count("ok: ") == 3, out
    assert jcode == 0
    report = json.loads(jout)
    assert [check["ok"] for check in report["online"]] == [True, True, True]
    assert scode == 0, serr
    synced = json.loads(sout)  # before: sync had no --json
    assert synced["endpoint"] == "com.acme.gh"
    assert {"pages", "issues", "changed"} <= synced.keys()
    # before: the budget the tracker's answers reported was only in /healthz
    (core,) = [b for b in synced["rateBudgets"] if b.get("resource", "core") == "core"]
    assert core["remaining"] <= core["limit"]

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    path.write_text(
        path.read_text(encoding="utf-8").replace(nats.url, f"nats://127.0.0.1:{closed}"),
        encoding="utf-8",
    )
    code, out, _ = await run("check-config", "--online", "--config", str(path), env=env)
    assert code == 1
    assert "FAILED: NATS: " in out
    assert "Check nats_url" in out


def _tracker_section(kind: str, api_url: str) -> str:
    head = f'[[endpoints]]\nname = "com.acme.{kind}"\nprovider = "{kind}"\n[endpoints.{kind}]\n'
    where = {
        "github": 'repository = "octo-org/hello-world"\n',
        "gitlab": 'project = "acme/widgets"\n',
        "jira": f'project = "{JIRA_PROJECT}"\nemail = "bridge@example.com"\n',
    }[kind]
    return f'{head}{where}api_url = "{api_url}"\ntoken_env = "{TOKEN_ENV}"\n'


@pytest.mark.parametrize("kind", ["github", "gitlab", "jira"])
async def test_online_reports_whether_the_token_may_write_back(tmp_path: Path, kind: str) -> None:
    fake: Any = {"github": FakeGitHub, "gitlab": FakeGitLab, "jira": FakeJira}[kind]()
    env = {**os.environ, TOKEN_ENV: fake.token}
    async with serve_on_loopback(fake) as api_url:
        path = write(tmp_path, _tracker_section(kind, api_url))
        args = ("check-config", "--online", "--config", str(path))
        code, out, err = await run(*args, env=env)
        jcode, jout, _ = await run(*args, "--json", env=env)
        fake.refuse_writes(403)  # the fakes answer a read-only token's permissions so
        rcode, rout, rerr = await run(*args, env=env)
        rjcode, rjout, _ = await run(*args, "--json", env=env)
    assert code == 0, (out, err)
    assert "write back" in out, out  # before: nothing said what the token may do
    assert "warning:" not in out
    (tracker,) = [c for c in json.loads(jout)["online"] if c["what"].endswith("tracker")]
    assert tracker["writes"] is True
    # A read-only token is not a failure of the config: it is reported with the remedy.
    assert rcode == 0, (rout, rerr)
    (warning,) = [line for line in rout.splitlines() if line.startswith("warning: ")]
    assert "read-only" in warning
    assert "write-back will be refused" in warning
    assert {"github": "Issues read and write", "gitlab": "Developer role", "jira": "Grant"}[
        kind
    ] in warning  # the remedy of this tracker
    (tracker,) = [c for c in json.loads(rjout)["online"] if c["what"].endswith("tracker")]
    assert tracker["ok"] is True
    assert tracker["writes"] is False
    assert jcode == rjcode == 0


WEBHOOK_ENV = "COTAL_TASKS_TEST_CHECK_WEBHOOK"
DASHBOARD_ENV = "COTAL_TASKS_TEST_CHECK_DASHBOARD"
# (case, the variables' values, what the one line of that mistake must say)
MISTAKES = [
    (
        "short-webhook-secret",
        {WEBHOOK_ENV: "x" * 11},
        f"{WEBHOOK_ENV} is 11 characters, at least 16",
    ),
    (
        "short-dashboard-token",
        {DASHBOARD_ENV: "x" * 5},
        f"{DASHBOARD_ENV} is 5 characters, at least 16",
    ),
    ("empty-token", {TOKEN_ENV: ""}, f"{TOKEN_ENV} is set but empty"),
    ("padded-token", {TOKEN_ENV: "ghp_abc "}, f"{TOKEN_ENV} starts or ends with whitespace"),
]
GOOD = {TOKEN_ENV: "ghp_token", WEBHOOK_ENV: "w" * 32, DASHBOARD_ENV: "d" * 32}


def _secrets_config(tmp: Path) -> Path:
    path = tmp / "tasks.toml"
    path.write_text(
        f'space = "demo"\ndata_dir = "{tmp / "data"}"\n[http]\nport = 0\n'
        f'[[http.tokens]]\ntoken_env = "{DASHBOARD_ENV}"\nprincipal = "local.dashboard"\n'
        f'{GITHUB}repository = "octo-org/hello-world"\napi_url = "http://127.0.0.1:9"\n'
        f'token_env = "{TOKEN_ENV}"\nwebhook_secret_env = "{WEBHOOK_ENV}"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "command", [("check-config",), ("check-config", "--online"), ("serve",)], ids=" ".join
)
async def test_what_serve_refuses_check_config_refuses_first(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Every mistake at once, one line each, exit 2: a short webhook secret or dashboard
    token, an empty or padded tracker token (before: check-config --online passed the
    first two and serve exited 1 after it started; the last two were found 10-20 s later
    as "the tracker did not answer")."""
    path = _secrets_config(tmp_path)
    env = dict(os.environ) | GOOD
    for _, values, _ in MISTAKES[:-1]:
        env |= values
    code, out, err = await run(*command, "--config", str(path), env=env)
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.startswith(("error: ", "cotal-tasks: "))]
    for _, _, says in MISTAKES[:-1]:
        (line,) = [line for line in lines if says in line]
        assert "endpoints.0.github." in line or "http.tokens.0." in line  # the key
    assert len(lines) == 3, err
    assert "did not answer" not in out + err
    assert "FAILED" not in out  # --online stops at the offline mistakes
    assert "x" * 11 not in out + err  # never the value


@pytest.mark.parametrize(("case", "values", "says"), MISTAKES, ids=[m[0] for m in MISTAKES])
async def test_each_mistake_alone_is_its_own_line(
    tmp_path: Path, case: str, values: dict[str, str], says: str
) -> None:
    path = _secrets_config(tmp_path)
    for command in ("check-config", "serve"):
        code, out, err = await run(
            command, "--config", str(path), env=dict(os.environ) | GOOD | values
        )
        assert code == 2, (command, out, err)
        (line,) = [line for line in err.splitlines() if says in line]
        assert line.startswith(("error: ", "cotal-tasks: ")), line


async def test_a_url_without_its_scheme_is_refused_as_the_file_loads(tmp_path: Path) -> None:
    body = (
        f'{GITHUB}repository = "octo org/x"\napi_url = "127.0.0.1:8765"\n'
        f'token_env = "{TOKEN_ENV}"\n'
    )
    path = write(tmp_path, body)
    for command in ("check-config", "serve"):
        code, out, err = await run(command, "--config", str(path), env=dict(os.environ) | GOOD)
        assert code == 2, (out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 2, err  # one line per mistake
        (url,) = [line for line in lines if "endpoints.0.github.api_url" in line]
        assert "'127.0.0.1:8765' is not an http:// or https:// URL" in url
        (repo,) = [line for line in lines if "endpoints.0.github.repository" in line]
        assert "is not OWNER/NAME" in repo
        assert "String should match pattern" not in err  # never pydantic's raw regex


async def test_online_names_a_refused_connection_at_once(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    body = (
        f'{GITHUB}repository = "octo-org/hello-world"\napi_url = "http://127.0.0.1:{closed}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
    )
    path = write(tmp_path, body)
    env = dict(os.environ) | GOOD
    code, out, err = await run("check-config", "--online", "--config", str(path), env=env)
    assert code == 1, (out, err)
    (line,) = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert f"connection refused at http://127.0.0.1:{closed}" in line  # before: "did not answer"
    assert "endpoints.0.github.api_url" in line
    # not retried (before: with backoff, 15 s on average): test_tracker_http_refused


@pytest.mark.parametrize("failure", ["wrong-token", "missing-repository"])
async def test_a_trackers_refusal_names_the_variable_and_the_repository(
    tmp_path: Path, github_url: str, failure: str
) -> None:
    repository = (
        "octo-org/no-such-repository" if failure == "missing-repository" else "octo-org/hello-world"
    )
    body = (
        f'{GITHUB}repository = "{repository}"\napi_url = "{github_url}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
    )
    path = write(tmp_path, body)
    token = "ghp_wrong000000000000000000" if failure == "wrong-token" else FakeGitHub().token
    env = dict(os.environ) | {TOKEN_ENV: token}
    for args in (("check-config", "--online"), ("check-config", "--preview", "2"), ("sync",)):
        code, out, err = await run(*args, "--config", str(path), env=env)
        assert code == 1, (args, out, err)
        said = out + err
        if failure == "wrong-token":
            assert f"the token in {TOKEN_ENV}" in said, (
                said
            )  # before: "the variable the endpoint's token_env names"
        else:
            assert f"no repository or project {repository}" in said, said
            assert f"the token in {TOKEN_ENV}" in said
