"""The lock file (``constraints.txt``) pins the whole dependency set, and the Makefile
installs through it: ``make run`` only what serving needs, ``make test`` the development
extras too (``.ci/run`` calls ``make test``)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "constraints.txt"
DEV_ONLY = {"pytest", "playwright", "mypy", "ruff", "hypothesis", "import-linter"}


def pins() -> dict[str, str]:
    pinned: dict[str, str] = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep, f"{line!r} in constraints.txt is not pinned with =="
            pinned[canonicalize_name(name)] = version.strip()
    return pinned


def closure(extras: set[str]) -> set[str]:
    """Every distribution cotal-tasks needs, with ``extras``, as installed here."""
    seen: set[str] = set()
    todo = [("cotal-tasks", extras)]
    while todo:
        name, wanted = todo.pop()
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is not None and not any(
                req.marker.evaluate({"extra": extra}) for extra in (wanted or {""})
            ):
                continue
            key = canonicalize_name(req.name)
            if key not in seen:
                seen.add(key)
                todo.append((req.name, set(req.extras)))
    return seen


def test_the_lock_pins_every_dependency_as_installed() -> None:
    pinned = pins()
    needed = closure({"dev"})
    assert needed >= DEV_ONLY
    missing = sorted(needed - set(pinned))
    assert not missing, f"not in constraints.txt: {missing}; run make lock"
    drift = {
        n: (metadata.version(n), pinned[n]) for n in needed if metadata.version(n) != pinned[n]
    }
    assert not drift, f"installed differs from the lock: {drift}"


def install_line(target: str) -> list[str]:
    """The pip install command the Makefile runs to make ``target`` (never run here)."""
    dry = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [ln for ln in dry.splitlines() if re.search(r"pip install .*-e ", ln)]
    return shlex.split(line)


def test_make_run_installs_only_what_serving_needs(tmp_path: Path) -> None:
    serve = install_line(".venv/.serve-stamp")
    assert serve[-4:] == ["-c", "constraints.txt", "-e", "."]
    assert not any("[dev]" in part for part in serve)  # before: make run installed .[dev]
    dev = install_line(".venv/.installed-stamp")
    assert "constraints.txt" in dev
    assert any("[dev]" in part for part in dev)

    report = tmp_path / "report.json"
    command = [sys.executable, *serve[1:], "--dry-run", "--ignore-installed", "--report", report]
    subprocess.run([str(part) for part in command], cwd=ROOT, capture_output=True, check=True)
    chosen = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text(encoding="utf-8"))["install"]
    }
    chosen.pop(canonicalize_name("cotal-tasks"))
    assert not DEV_ONLY & set(chosen), sorted(DEV_ONLY & set(chosen))
    pinned = pins()
    assert {name: pinned.get(name) for name in chosen} == chosen  # every one as locked
