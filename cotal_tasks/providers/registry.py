"""The providers an endpoint can name (``provider = "…"``): the one list of them.

Adding a provider is its folder under ``providers/``, its line here, and its docs
(``docs/providers.md`` says how).
"""

from __future__ import annotations

from typing import Any

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers import board, github, gitlab, jira, linear, tower_do
from cotal_tasks.providers.provider import Provider

PROVIDERS: tuple[Provider[Any], ...] = (
    board.PROVIDER,
    github.PROVIDER,
    gitlab.PROVIDER,
    jira.PROVIDER,
    linear.PROVIDER,
    tower_do.PROVIDER,
)

BY_NAME: dict[str, Provider[Any]] = {p.name: p for p in PROVIDERS}


def names() -> str:
    """The valid provider names, for messages: ``board, github, gitlab or tower-do``."""
    listed = [p.name for p in PROVIDERS]
    return ", ".join(listed[:-1]) + " or " + listed[-1] if len(listed) > 1 else listed[0]


def unknown(name: object) -> str:
    """What is said of a ``provider = …`` the registry does not hold (the config's check
    and ``provider`` alike)."""
    return f"provider {name!r} is not known. Set provider to one of {names()}"


def provider(name: str) -> Provider[Any]:
    found = BY_NAME.get(name)
    if found is None:
        raise ContractError(ErrorCode.BAD_REQUEST, unknown(name))
    return found
