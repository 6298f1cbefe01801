"""The import contracts in ``pyproject.toml`` guard every provider without naming one.

import-linter reads its contracts from ``pyproject.toml`` alone. The contracts reach the
providers by wildcard (``cotal_tasks.providers.*``), so a provider added to the registry
is guarded the moment its folder exists, and adding one edits no contract: this checks
that every registered provider is where the wildcards look, and that no contract names a
mirrored source (a tracker or a tower-do board), which would make the next one an edit.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from cotal_tasks.providers.registry import PROVIDERS

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
CONTRACTS: list[dict[str, Any]] = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"][
    "contracts"
]
PROVIDERS_PACKAGE = "cotal_tasks.providers"


def _package(settings: type[Any]) -> str:
    return ".".join(settings.__module__.split(".")[:3])  # cotal_tasks.providers.<name>


def test_every_registered_provider_is_a_folder_the_wildcards_reach() -> None:
    for entry in PROVIDERS:
        module = entry.settings.__module__
        assert module.startswith(PROVIDERS_PACKAGE + "."), (
            f"provider {entry.name!r} keeps its settings in {module}; give it a folder under "
            f"{PROVIDERS_PACKAGE}, which the contracts' wildcards cover"
        )


def test_no_contract_names_a_mirrored_source() -> None:
    sources = {_package(entry.settings) for entry in PROVIDERS if entry.mirrors}
    assert len(sources) >= 3  # github, gitlab, tower_do: the check has something to find
    for contract in CONTRACTS:
        text = json.dumps(contract)
        named = sorted(source for source in sources if source in text)
        assert not named, (
            f"the contract {contract['name']!r} names {named}; reach the providers by "
            f"wildcard ({PROVIDERS_PACKAGE}.*) so a new one needs no edit here"
        )


def test_the_whole_package_is_checked_for_cycles() -> None:
    acyclic = [c for c in CONTRACTS if c["type"] == "acyclic_siblings"]
    assert [c["ancestors"] for c in acyclic] == [["cotal_tasks"]]
