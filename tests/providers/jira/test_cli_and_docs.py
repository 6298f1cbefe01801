"""``cotal-tasks check-config --preview`` and ``cotal-tasks sync`` on a Jira endpoint as a
user runs them (a subprocess of the installed command, the fake Jira on loopback); the
example config loads; docs/jira.md's status table says what the default rules do."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.bridge.config import load_config
from cotal_tasks.providers.hosted.mapping import evaluate
from cotal_tasks.providers.jira.config import JiraConfig, jira_default_rules
from cotal_tasks.providers.jira.mapping import native_of
from tests.providers.jira._support import ENDPOINT_NAME, SEAT_ACCOUNT, TOKEN_ENV
from tests.providers.test_docs_tables import rows
from tests.support.cli import run_wide
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

ROOT = Path(__file__).parents[3]


@pytest.fixture
def config_file(tmp_path: Path, jira_url: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(
        f"""space = "demo"
data_dir = "{tmp_path / "data"}"

[http]
enabled = false

[[endpoints]]
name = "{ENDPOINT_NAME}"
provider = "jira"

[endpoints.jira]
api_url = "{jira_url}"
project = "{PROJECT}"
email = "bridge@example.com"
token_env = "{TOKEN_ENV}"

[endpoints.jira.seats]
"{SEAT_ACCOUNT}" = "local.builder"
""",
        encoding="utf-8",
    )
    return path


async def test_preview_shows_the_mapping_and_writes_nothing(
    jira: FakeJira, config_file: Path, tmp_path: Path
) -> None:
    jira.add_issue(PROJECT, "Write the parser", "In **full**.")
    jira.advance(60)
    done = jira.add_issue(PROJECT, "Ship it")
    done.status, done.resolution = "Done", "Won't Do"
    done.remote_links = [{"object": {"url": "https://github.com/acme/app/pull/4"}}]
    code, out, err = await run_wide("check-config", "--config", str(config_file), "--preview", "2")
    assert code == 0, err
    assert f"preview of {ENDPOINT_NAME} (nothing was written):" in out, out
    assert f"{PROJECT}#1: Write the parser" in out
    assert "status open (statusSource 'To Do'), unbound" in out
    assert 'status dropped (statusSource "Done/Won\'t Do"), unbound' in out
    assert "evidence review: https://github.com/acme/app/pull/4" in out
    assert not (tmp_path / "data").exists()
    assert jira.writes == []


async def test_sync_imports_and_an_unchanged_sync_is_one_search(
    jira: FakeJira, config_file: Path
) -> None:
    for k in range(5):
        jira.add_issue(PROJECT, f"Issue {k}")
    code, out, err = await run_wide("sync", "--config", str(config_file))
    assert code == 0, err
    assert "5 issue(s) read" in out
    assert jira.token not in out + err
    code, out, err = await run_wide("sync", "--config", str(config_file))
    assert code == 0, err
    assert "0 issue(s) read" in out


def test_the_example_config_loads() -> None:
    config = load_config(ROOT / "examples" / "jira.toml")
    (endpoint,) = config.endpoints
    assert isinstance(endpoint.settings, JiraConfig)
    assert endpoint.settings.project == "DEMO"


@pytest.mark.parametrize(
    ("status", "category", "resolution", "labels"),
    [
        ("Done", "done", "Won't Do", ()),
        ("Done", "done", "Duplicate", ()),
        ("Done", "done", "Cannot Reproduce", ()),
        ("Done", "done", "Done", ()),
        ("Done", "done", None, ()),
        ("In Progress", "indeterminate", None, ("blocked",)),
        ("Blocked", "indeterminate", None, ()),
        ("In Progress", "indeterminate", None, ()),
        ("To Do", "new", None, ()),
    ],
)
def test_the_docs_table_says_what_the_default_rules_do(
    status: str, category: str, resolution: str | None, labels: tuple[str, ...]
) -> None:
    fields = {
        "status": {"name": status},
        "labels": list(labels),
        "resolution": {"name": resolution} if resolution else None,
    }
    decided, source = evaluate(jira_default_rules(), native_of(fields, category))
    row = next((r for r in rows("jira.md") if r[0] == decided and f"`{source}`" in r[2]), None)
    assert row is not None, f"docs/jira.md: no row says {decided} with statusSource {source!r}"
