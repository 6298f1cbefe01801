"""The config file: an endpoint's provider and its ``[endpoints.<section>]`` table become
one member of the settings union; every refusal names the key and the remedy."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig, load_config
from cotal_tasks.core import ContractError, ErrorCode, Task
from cotal_tasks.core.models import CLOSED, Record, Settings
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


def test_every_provider_has_a_shipped_example() -> None:
    """README promises a config per tracker in examples/: each provider is the provider of
    an endpoint in at least one of them (each of which the test above loads)."""
    shown = {
        endpoint.provider
        for example in EXAMPLES.glob("*.toml")
        for endpoint in load_config(example).endpoints
    }
    assert {entry.name for entry in PROVIDERS} - shown == set()


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        pytest.param(
            '[[endpoints]]\nprovider = "redmine"\n',
            [
                "endpoints.0: provider 'redmine' is not known",
                "Set provider to one of board, github, gitlab, jira, linear or tower-do",
            ],
            id="an unknown provider names the valid ones",
        ),
        pytest.param(
            '[[endpoints]]\nprovider = "github"\n',
            ["provider 'github' needs an [endpoints.github] section. Add it"],
            id="a tracker without its section",
        ),
        pytest.param(
            '[[endpoints]]\nprovider = "github"\n[endpoints.github]\nrepository = "a/b"\n'
            '[endpoints.gitlab]\nproject = "acme/widgets"\n',
            [
                "an [endpoints.gitlab] section belongs to provider = 'gitlab', not 'github'",
                "Remove the section or set the provider",
            ],
            id="a section of another provider",
        ),
        pytest.param(
            '[[endpoints]]\n[endpoints.tower_do]\nboard = "b.jsonl"\n',
            ["belongs to provider = 'tower-do', not 'board'"],
            id="a board takes no tracker section",
        ),
        pytest.param(
            '[[endpoints]]\nprovider = "tower-do"\n[endpoints.tower_do]\n'
            'board = "b.jsonl"\npoll_interval_s = 0\n',
            ["endpoints.0.tower_do.poll_interval_s:"],
            id="a bad value is located where the file has it",
        ),
        pytest.param(
            '[[endpoints]]\nprovider = "github"\n[endpoints.github]\n'
            'repository = "a/b"\nrepo = 1\n',
            ["endpoints.0.github.repo: repo is not a setting here (did you mean repository?)"],
            id="an unknown key is located where the file has it",
        ),
        pytest.param(
            '[[endpoints]]\n[endpoints.settings]\nprovider = "tower-do"\nboard = "b.jsonl"\n',
            ["endpoints.0: settings is not a config key. Set provider and its"],
            id="a settings table is no way around the provider's section",
        ),
    ],
)
def test_a_refusal_names_the_key_and_the_remedy(
    tmp_path: Path, endpoints: str, expected: list[str]
) -> None:
    message = refusal(tmp_path, endpoints)
    for part in expected:
        assert part in message
    assert ".settings." not in message  # located in the file's own terms


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
    assert sorted(routes) == ["github", "gitlab", "jira", "linear"]
    with pytest.raises(ContractError, match="Set provider to one of board, github"):
        provider("redmine")


def test_an_unknown_provider_is_worded_once_for_the_file_and_the_registry(
    tmp_path: Path,
) -> None:
    with pytest.raises(ContractError) as from_file:
        load_config(write(tmp_path, '[[endpoints]]\nprovider = "redmine"\n'))
    with pytest.raises(ContractError) as from_registry:
        provider("redmine")
    assert from_registry.value.code is ErrorCode.BAD_REQUEST
    assert from_registry.value.message in from_file.value.message


def test_every_settings_model_and_contract_shape_keeps_the_one_closed_policy() -> None:
    """Unknown keys refused, frozen, refused values never quoted: written once (CLOSED),
    for the bridge's settings, every provider's, and the contract's shapes."""
    models: list[type[BaseModel]] = [BridgeConfig, EndpointConfig, HttpConfig]
    models += [p.settings for p in PROVIDERS]
    for model in models:
        assert issubclass(model, Settings), model
    shapes: list[type[BaseModel]] = [*models, Record, Task]
    for shape in shapes:
        for key, value in CLOSED.items():
            assert shape.model_config.get(key) == value, (shape, key)
