"""The import contracts in ``pyproject.toml`` guard every provider without naming one.

import-linter reads its contracts from ``pyproject.toml`` alone. The contracts reach the
providers by wildcard (``cotal_tasks.providers.*``), so a provider added to the registry
is guarded the moment its folder exists, and adding one edits no contract: this checks
that every registered provider is where the wildcards look, and that no contract names a
mirrored source (a tracker or a tower-do board), which would make the next one an edit.
"""

from __future__ import annotations

import ast
import importlib
import json
import tomllib
from pathlib import Path
from typing import Any

from cotal_tasks.providers.registry import PROVIDERS
from cotal_tasks.providers.store import JsonReads, Mirror, TaskStore

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


def _provider_names(tree: ast.Module) -> set[str]:
    """The names a module binds from ``cotal_tasks.providers``, but for exception types
    (catching a port's exception is no question put to a store or a part)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PROVIDERS_PACKAGE):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                bound = getattr(module, alias.name, None)
                if isinstance(bound, type) and issubclass(bound, BaseException):
                    continue
                names.add(alias.asname or alias.name)
    return names


def test_the_bridge_asks_no_store_or_part_what_it_is() -> None:
    """No ``isinstance`` against anything of the providers anywhere in the bridge: an
    endpoint's build declares what it can do (``Built``), and the ports cannot be asked
    (none of them is ``runtime_checkable``)."""
    asked: list[str] = []
    for path in sorted((PYPROJECT.parent / "cotal_tasks" / "bridge").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _provider_names(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                kinds = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if kinds & names:
                    asked.append(f"{path.name}:{node.lineno} {sorted(kinds & names)}")
    assert not asked, f"declare it on Built instead of asking: {asked}"
    for port in (TaskStore, JsonReads, Mirror):
        assert not getattr(port, "_is_runtime_protocol", False), port
