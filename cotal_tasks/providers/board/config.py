"""Settings of a board endpoint: none of its own (the endpoint's ``database`` is where it
lives); the model only carries the ``provider`` tag of the endpoint's settings union."""

from __future__ import annotations

from typing import Literal

from cotal_tasks.core.models import Settings


class BoardConfig(Settings):
    provider: Literal["board"] = "board"
