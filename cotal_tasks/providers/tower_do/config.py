"""Settings of a tower-do endpoint, and where its board file is.

A tower-do board is one append-only JSONL file per project. The endpoint names the file
itself (``board``), or the project directory (``project``), from which the file is found
as tower-do finds it: ``~/.pi/tower-do/<slug>-<hash>/board.jsonl``, where ``<slug>-<hash>``
is the project's git root made filename-safe plus the first 8 hex digits of its SHA-256;
releases before the move kept it at ``<root>/.pi/tower-do/board.jsonl``, which is used
when only that one exists.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from cotal_tasks.core.identity import Principal
from cotal_tasks.core.models import Settings

Identity = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\r\n\u2028\u2029\x00]+$")]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class TowerDoConfig(Settings):
    """``[endpoints.tower_do]``: the board, the seat directory, how often to look."""

    provider: Literal["tower-do"] = "tower-do"
    board: Path | None = None  # the board.jsonl itself
    project: Path | None = None  # or the project directory, resolved as tower-do does
    home: Path | None = None  # the home directory tower-do uses; default $HOME
    # tower-do identity -> seat principal owner.actor. Only these identities can ever
    # produce a binding; every other owner is somebody Cotal does not know.
    seats: dict[Identity, Principal] = Field(default_factory=dict)
    # The identity the endpoint writes as when no seat identity applies (administer-task
    # and bind-task act as tower-do's orchestrator identity "tower" instead).
    identity: Identity = "cotal"
    poll_interval_s: Annotated[float, Field(gt=0, le=3600)] = 2.0  # beside the file watcher

    @model_validator(mode="after")
    def _one_place(self) -> TowerDoConfig:
        if (self.board is None) == (self.project is None):
            raise ValueError(
                "give exactly one of board (the board.jsonl file) or project (the project "
                "directory tower-do runs in)"
            )
        if len(set(self.seats.values())) != len(self.seats):
            raise ValueError("two tower-do identities map to one seat; map each seat once")
        return self

    def board_file(self) -> Path:
        """The board file this endpoint serves."""
        if self.board is not None:
            return self.board
        assert self.project is not None
        return board_file_for(self.project, self.home)


def project_root(directory: Path) -> Path:
    """The nearest ancestor that is a git work tree (a ``.git`` directory, or a ``.git``
    file of a worktree or submodule), else ``directory`` itself."""
    start = Path(os.path.abspath(directory))
    for candidate in (start, *start.parents):
        mark = candidate / ".git"
        if mark.is_dir():
            return candidate
        if mark.is_file():
            try:
                if mark.read_text(encoding="utf-8", errors="replace").startswith("gitdir:"):
                    return candidate
            except OSError:
                pass
    return start


def state_dir_name(root: Path) -> str:
    """``<slug>-<hash>``: the project root made filename-safe, plus 8 hex of its SHA-256."""
    text = str(root)
    slug = _UNSAFE.sub("-", text).strip("-") or "project"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def board_file_for(project: Path, home: Path | None = None) -> Path:
    root = project_root(project)
    base = home if home is not None else Path(os.environ.get("HOME") or Path.home())
    current = base / ".pi" / "tower-do" / state_dir_name(root) / "board.jsonl"
    legacy = root / ".pi" / "tower-do" / "board.jsonl"
    if not current.exists() and legacy.exists():
        return legacy
    return current
