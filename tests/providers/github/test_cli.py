"""``cotal-tasks sync`` and ``cotal-tasks check-config --preview`` as a user runs them (a
subprocess of the installed command) against the fake GitHub on loopback."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from cotal_tasks.providers.board import BoardStore
from tests.providers.github._support import ENDPOINT_NAME, REPO, SEAT_LOGIN, TOKEN_ENV
from tests.support.cli import run
from tests.support.fake_github import FakeGitHub


@dataclass
class Run:
    code: int
    out: str
    err: str


async def cotal_tasks(*args: str) -> Run:
    return Run(*await run(*args, env={**os.environ, "COLUMNS": "100"}))


@pytest.fixture
def config_file(tmp_path: Path, github_url: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(
        f"""space = "demo"
data_dir = "{tmp_path / "data"}"

[http]
enabled = false

[[endpoints]]
name = "{ENDPOINT_NAME}"
provider = "github"

[endpoints.github]
repository = "{REPO}"
api_url = "{github_url}"
token_env = "{TOKEN_ENV}"
mutation_spacing_s = 0

[endpoints.github.seats]
{SEAT_LOGIN} = "local.builder"
""",
        encoding="utf-8",
    )
    return path


def mirror_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / f"{ENDPOINT_NAME.replace('.', '_')}.db"


async def test_sync_imports_with_progress_and_a_summary(
    fake: FakeGitHub, config_file: Path, tmp_path: Path
) -> None:
    fake.bulk_issues(REPO, 250, closed_every=10)

    run = await cotal_tasks("sync", "--config", str(config_file))

    assert run.code == 0, run.err
    summary = (
        f"{ENDPOINT_NAME}: synced: 3 page(s), 250 issue(s) read, 0 fetched with evidence, "
        "250 task(s) changed"
    )
    # Off a terminal, click's progress bar shows its label once, before the summary.
    assert run.out.index(f"syncing {ENDPOINT_NAME}") < run.out.index(summary)
    assert fake.token not in run.out + run.err
    store = await BoardStore.open(f"sqlite:///{mirror_path(tmp_path)}")
    try:
        assert await store.change_seq() == 250
    finally:
        await store.close()

    # Run again: the import's last page had room to spare, so its ETag answers for the
    # whole listing: a conditional request, 304, every time nothing changed; and the issue
    # events feed, which a sync (to the present) reads whatever its cadence, answers 304 too.
    mark = len(fake.requests)
    again = await cotal_tasks("sync", "--config", str(config_file))
    assert "unchanged (conditional requests answered 304): 0 page(s), 0 issue(s) read" in again.out
    assert [r.status for r in fake.requests[mark:]] == [304, 304]
    mark = len(fake.requests)
    unchanged = await cotal_tasks("sync", "--config", str(config_file))
    assert unchanged.code == 0, unchanged.err
    assert f"{ENDPOINT_NAME}: unchanged (conditional requests answered 304)" in unchanged.out
    assert [r.status for r in fake.requests[mark:]] == [304, 304]


async def test_sync_failure_is_a_contract_error_exit(
    fake: FakeGitHub, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "ghp_revoked0000000000000000000000000000000")
    run = await cotal_tasks("sync", "--config", str(config_file))
    assert run.code == 1
    assert "401" in run.err
    assert "ghp_revoked" not in run.out + run.err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_preview_shows_the_mapping_and_writes_nothing(
    fake: FakeGitHub, config_file: Path, tmp_path: Path
) -> None:
    fake.bulk_issues(REPO, 120)
    fake.advance(60)
    fake.add_issue(REPO, "Blocked on the vendor", labels=["blocked"], assignees=[SEAT_LOGIN])
    fake.advance(60)
    fake.add_pull(REPO, "Fix it", head_ref="fix-121", closes=[121])

    run = await cotal_tasks("check-config", "--config", str(config_file), "--preview", "3")

    assert run.code == 0, run.err
    assert f"preview of {ENDPOINT_NAME} (nothing was written):" in run.out
    assert f"{REPO}#121: Blocked on the vendor" in run.out
    # No presence in a preview: the seat's assignment cannot bind, so the invariant says
    # open, with the native label kept as statusSource.
    assert "status open (statusSource 'blocked'), unbound" in run.out
    assert f"evidence review: https://github.com/{REPO}/pull/122" in run.out
    assert "evidence branch: fix-121" in run.out
    assert not (tmp_path / "data").exists()  # no mirror, no data directory
    assert fake.writes == []
    assert all(r.method == "GET" or r.path == "/graphql" for r in fake.requests)  # reads

    # With a mirror in place (a sync ran), a preview leaves it byte for byte as it was.
    assert (await cotal_tasks("sync", "--config", str(config_file))).code == 0
    mirror = mirror_path(tmp_path)
    before = {p.name: digest(p) for p in mirror.parent.iterdir()}
    fake.advance(60)
    fake.close_issue(REPO, 3)  # something the mirror does not know yet
    again = await cotal_tasks("check-config", "--config", str(config_file), "--preview", "2")
    assert again.code == 0, again.err
    assert f"{REPO}#3: " in again.out
    assert "status done (statusSource 'closed'), unbound" in again.out
    assert {p.name: digest(p) for p in mirror.parent.iterdir()} == before
    assert fake.writes == []


async def test_sync_summary_counts_degraded_items(fake: FakeGitHub, config_file: Path) -> None:
    fake.bulk_issues(REPO, 3)
    fake.add_pull(REPO, "Refresh tokens", head_ref="fix/token=refresh", closes=[1])

    run = await cotal_tasks("sync", "--config", str(config_file))

    assert run.code == 0, run.err  # before: the sync failed on the refused branch
    assert f"{ENDPOINT_NAME}: 1 item(s) degraded (1 evidence-refused)" in run.out
    assert "fix/token=refresh" not in run.out + run.err
