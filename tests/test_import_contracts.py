"""The import contracts in ``pyproject.toml`` name every provider the registry holds.

import-linter reads its contracts from ``pyproject.toml`` alone, so a provider added to
the registry but not to those lists would be left unguarded without a word; this check
says which contract misses it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.hosted.config import HostedConfig
from cotal_tasks.providers.registry import PROVIDERS

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
CONTRACTS: dict[str, dict[str, Any]] = {
    c["name"]: c for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
}
# Contracts that must forbid every concrete provider (board included), and those that
# must name every hosted tracker folder.
EVERY_PROVIDER = (
    "only the composition root names concrete providers",
    "the command service and the wire know no provider's machinery",
    "the HTTP app names no concrete provider",
)
EVERY_TRACKER = ("the shared hosted machinery and the board know no tracker",)


def _package(settings: type[Any]) -> str:
    return ".".join(settings.__module__.split(".")[:3])  # cotal_tasks.providers.<name>


PACKAGES = sorted({_package(p.settings) for p in PROVIDERS})
TRACKERS = sorted({_package(p.settings) for p in PROVIDERS if issubclass(p.settings, HostedConfig)})


def test_the_registry_is_what_the_contracts_are_checked_against() -> None:
    assert "cotal_tasks.providers.board" in PACKAGES
    assert TRACKERS == [
        "cotal_tasks.providers.github",
        "cotal_tasks.providers.gitlab",
        "cotal_tasks.providers.jira",
    ]


@pytest.mark.parametrize("name", EVERY_PROVIDER)
def test_every_provider_is_forbidden_to_the_bridge_parts(name: str) -> None:
    missing = set(PACKAGES) - set(CONTRACTS[name]["forbidden_modules"])
    assert not missing, f"add {sorted(missing)} to the forbidden_modules of {name!r}"


@pytest.mark.parametrize("name", EVERY_TRACKER)
def test_every_tracker_is_forbidden_to_the_shared_machinery(name: str) -> None:
    missing = set(PACKAGES) - {"cotal_tasks.providers.board"}
    missing -= set(CONTRACTS[name]["forbidden_modules"])
    assert not missing, f"add {sorted(missing)} to the forbidden_modules of {name!r}"


def test_no_tracker_folder_imports_another() -> None:
    modules = set(CONTRACTS["no tracker folder imports the other"]["modules"])
    assert set(TRACKERS) <= modules, f"add {sorted(set(TRACKERS) - modules)} to its modules"
