"""Settings of a board endpoint: none of its own (the endpoint's ``database`` is where it
lives); the model only carries the ``provider`` tag of the endpoint's settings union."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class BoardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    provider: Literal["board"] = "board"
