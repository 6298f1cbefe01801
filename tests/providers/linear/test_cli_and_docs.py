"""``cotal-tasks check-config --preview`` / ``--online`` and ``cotal-tasks sync`` on a
Linear endpoint as a user runs them (a subprocess of the installed command, the fake
Linear on loopback); the example config loads; docs/linear.md's status table says what
the default rules do."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.bridge.config import load_config
from cotal_tasks.providers.hosted.mapping import evaluate
from cotal_tasks.providers.linear.config import LinearConfig, linear_default_rules
from cotal_tasks.providers.linear.mapping import native_of
from tests.providers.linear._support import ENDPOINT_NAME, TOKEN_ENV
from tests.providers.test_docs_tables import rows
from tests.support.cli import run_wide
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import WORKFLOW

ROOT = Path(__file__).parents[3]


@pytest.fixture
def config_file(tmp_path: Path, linear_url: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(
        f"""space = "demo"
data_dir = "{tmp_path / "data"}"

[http]
enabled = false

[[endpoints]]
name = "{ENDPOINT_NAME}"
provider = "linear"

[endpoints.linear]
api_url = "{linear_url}"
teams = ["ENG"]
token_env = "{TOKEN_ENV}"
""",
        encoding="utf-8",
    )
    return path


async def test_preview_shows_the_mapping_and_writes_nothing(
    linear: FakeLinear, config_file: Path, tmp_path: Path
) -> None:
    linear.new_issue("Write the parser", "In **full**.")
    linear.advance(60)
    dropped = linear.new_issue("Ship it", state="Canceled")
    linear.attach(dropped, "https://github.com/acme/app/pull/4")
    code, out, err = await run_wide("check-config", "--config", str(config_file), "--preview", "2")
    assert code == 0, err
    assert f"preview of {ENDPOINT_NAME} (nothing was written):" in out, out
    assert "ENG-1: Write the parser" in out
    assert "status open (statusSource 'Todo'), unbound" in out
    assert "status dropped (statusSource 'Canceled'), unbound" in out
    assert "evidence review: https://github.com/acme/app/pull/4" in out
    assert not (tmp_path / "data").exists()
    assert linear.writes == []


async def test_preview_walks_each_team_and_says_why_the_scope_leaves_one_out(
    linear: FakeLinear, config_file: Path
) -> None:
    linear.add_team("OPS")
    linear.add_label("wontfix")
    linear.new_issue("Engineering work")
    linear.label(linear.new_issue("Not for agents", team="OPS"), "wontfix")
    text = config_file.read_text(encoding="utf-8").replace(
        'teams = ["ENG"]', 'teams = ["ENG", "OPS"]'
    )
    config_file.write_text(
        text + 'project = "Agents"\n[endpoints.linear.scope]\nexclude_labels = ["wontfix"]\n',
        encoding="utf-8",
    )
    linear.add_project("Agents")
    for issue in linear.issues.values():
        issue.project = "Agents"
    code, out, err = await run_wide("check-config", "--config", str(config_file), "--preview", "2")
    assert code == 0, err
    assert "2 sources: ENG, OPS; created in ENG" in out, out
    assert "scope: not label wontfix" in out
    assert "linear scope: project Agents" in out
    assert "ENG-1: Engineering work" in out
    assert "OPS-1: Not for agents" in out
    assert "status dropped (statusSource 'out of scope: label wontfix added')" in out
    assert linear.writes == []


async def test_online_says_whose_the_token_is_and_which_teams_it_reads(
    linear: FakeLinear, config_file: Path
) -> None:
    code, out, err = await run_wide("check-config", "--config", str(config_file), "--online")
    assert code == 0, err
    assert "the token is the user bridge's and reads ENG" in out, out
    assert linear.token not in out + err


async def test_sync_imports_and_an_unchanged_sync_reads_nothing(
    linear: FakeLinear, config_file: Path
) -> None:
    for k in range(5):
        linear.new_issue(f"Issue {k}")
    code, out, err = await run_wide("sync", "--config", str(config_file))
    assert code == 0, err
    assert "5 issue(s) read" in out
    assert linear.token not in out + err
    linear.advance(120)
    code, out, err = await run_wide("sync", "--config", str(config_file))
    assert code == 0, err
    assert "0 issue(s) read" in out


def test_the_example_config_loads() -> None:
    config = load_config(ROOT / "examples" / "linear.toml")
    (endpoint,) = config.endpoints
    assert isinstance(endpoint.settings, LinearConfig)
    assert endpoint.settings.sources == ("ENG", "OPS")
    assert endpoint.settings.routed == "ENG"
    assert endpoint.settings.scope.labels == ("agent-ready",)


@pytest.mark.parametrize(("name", "kind", "position"), WORKFLOW)
def test_the_docs_table_says_what_the_default_rules_do(
    name: str, kind: str, position: float
) -> None:
    native = native_of({"state": {"name": name, "type": kind}})
    decided, source = evaluate(linear_default_rules(), native)
    row = next((r for r in rows("linear.md") if r[0] == decided and f"`{source}`" in r[2]), None)
    assert row is not None, f"docs/linear.md: no row says {decided} with statusSource {source!r}"
