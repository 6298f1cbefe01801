"""The config file: an endpoint's provider and its ``[endpoints.<section>]`` table become
one member of the settings union; every refusal names the key and the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.bridge.config import EndpointConfig, load_config
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import BoardConfig
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.registry import PROVIDERS, provider
from cotal_tasks.providers.tower_do.config import TowerDoConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path: Path, endpoints: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(f'space = "demo"\n\n{endpoints}', encoding="utf-8")
    return path


def refusal(tmp_path: Path, endpoints: str) -> str:
    with pytest.raises(ContractError) as caught:
        load_config(write(tmp_path, endpoints))
    assert caught.value.code is ErrorCode.BAD_REQUEST
    return caught.value.message


def test_each_provider_section_loads_into_its_own_settings(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """[[endpoints]]
name = "com.acme.board"

[[endpoints]]
name = "com.acme.github"
provider = "github"
[endpoints.github]
repository = "octo-org/hello-world"
poll_interval_s = 30

[[endpoints]]
name = "com.acme.gitlab"
provider = "gitlab"
[endpoints.gitlab]
project = "acme/widgets"
pagination = "keyset"

[[endpoints]]
name = "com.acme.agents"
provider = "tower-do"
[endpoints.tower_do]
board = "board.jsonl"
""",
        )
    )
    board, github, gitlab, tower = config.endpoints
    assert isinstance(board.settings, BoardConfig)
    assert board.provider == "board"
    assert isinstance(github.settings, GitHubConfig)
    assert github.provider == "github"
    assert github.settings.repository == "octo-org/hello-world"
    assert github.settings.poll_interval_s == 30
    assert len(github.settings.status_rules) == 7  # the GitHub defaults
    assert isinstance(gitlab.settings, GitLabConfig)
    assert gitlab.provider == "gitlab"
    assert gitlab.settings.pagination == "keyset"
    assert gitlab.settings.claimed_label == "workflow::in progress"
    assert isinstance(tower.settings, TowerDoConfig)
    assert tower.provider == "tower-do"
    assert tower.settings.board == Path("board.jsonl")


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_the_shipped_examples_load(example: Path) -> None:
    config = load_config(example)
    for endpoint in config.endpoints:
        assert provider(endpoint.provider).settings is type(endpoint.settings)


def test_an_unknown_provider_names_the_valid_ones(tmp_path: Path) -> None:
    message = refusal(tmp_path, '[[endpoints]]\nprovider = "jira"\n')
    assert "endpoints.0: provider 'jira' is not known" in message
    assert "Set provider to one of board, github, gitlab or tower-do" in message


def test_a_tracker_without_its_section_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, '[[endpoints]]\nprovider = "github"\n')
    assert "provider 'github' needs an [endpoints.github] section. Add it" in message


def test_a_section_of_another_provider_is_refused(tmp_path: Path) -> None:
    message = refusal(
        tmp_path,
        '[[endpoints]]\nprovider = "github"\n[endpoints.github]\nrepository = "a/b"\n'
        '[endpoints.gitlab]\nproject = "acme/widgets"\n',
    )
    assert "an [endpoints.gitlab] section belongs to provider = 'gitlab', not 'github'" in message
    assert "Remove the section or set the provider" in message


def test_a_board_takes_no_tracker_section(tmp_path: Path) -> None:
    message = refusal(tmp_path, '[[endpoints]]\n[endpoints.tower_do]\nboard = "b.jsonl"\n')
    assert "belongs to provider = 'tower-do', not 'board'" in message


def test_a_bad_value_is_located_where_the_file_has_it(tmp_path: Path) -> None:
    message = refusal(
        tmp_path,
        '[[endpoints]]\nprovider = "tower-do"\n[endpoints.tower_do]\n'
        'board = "b.jsonl"\npoll_interval_s = 0\n',
    )
    assert "endpoints.0.tower_do.poll_interval_s:" in message
    assert ".settings." not in message
    unknown = refusal(
        tmp_path,
        '[[endpoints]]\nprovider = "github"\n[endpoints.github]\nrepository = "a/b"\nrepo = 1\n',
    )
    assert "endpoints.0.github.repo: Extra inputs are not permitted" in unknown


def test_settings_given_as_a_model_need_no_provider_key() -> None:
    endpoint = EndpointConfig(name="com.acme.gitlab", settings=GitLabConfig(project="a/b"))
    assert endpoint.provider == "gitlab"
    assert EndpointConfig().provider == "board"


def test_the_registry_is_consistent() -> None:
    names = [p.name for p in PROVIDERS]
    assert len(set(names)) == len(names)
    for entry in PROVIDERS:
        tag = entry.settings.model_fields["provider"].default
        assert tag == entry.name, f"{entry.name}'s settings are tagged {tag!r}"
        assert (entry.section is None) == (entry.name == "board")
    routes = [p.webhook.route for p in PROVIDERS if p.webhook is not None]
    assert sorted(routes) == ["github", "gitlab"]
    with pytest.raises(ContractError, match="Set provider to one of board, github"):
        provider("jira")
