"""Fixtures for the Linear provider tests: the fake Linear on loopback with its token in
the environment, its agent, a seat's user account and a person, and a Linear endpoint on
a fresh SQLite mirror whose seat directory maps the agent and the user account."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bridge._support import DictPresence
from tests.providers.linear._support import (
    BUILDER,
    REVIEWER,
    TOKEN_ENV,
    LinearEndpoint,
    make_fake,
    open_linear,
)
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import User
from tests.support.fake_tracker import serve_on_loopback


@pytest.fixture
def workspace() -> tuple[FakeLinear, User, User, User]:
    return make_fake()


@pytest.fixture
def linear(workspace: tuple[FakeLinear, User, User, User]) -> FakeLinear:
    return workspace[0]


@pytest.fixture
def agent(workspace: tuple[FakeLinear, User, User, User]) -> User:
    return workspace[1]


@pytest.fixture
def reviewer(workspace: tuple[FakeLinear, User, User, User]) -> User:
    return workspace[2]


@pytest.fixture
def person(workspace: tuple[FakeLinear, User, User, User]) -> User:
    return workspace[3]


@pytest.fixture(autouse=True)
def linear_token(linear: FakeLinear, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, linear.token)
    return linear.token


@pytest.fixture
async def linear_url(linear: FakeLinear) -> AsyncIterator[str]:
    async with serve_on_loopback(linear) as url:
        yield url


@pytest.fixture
async def ln(
    linear: FakeLinear,
    linear_url: str,
    agent: User,
    reviewer: User,
    tmp_path: Path,
    presence: DictPresence,
) -> AsyncIterator[LinearEndpoint]:
    """A Linear endpoint on a SQLite mirror, nothing synced yet; both seats present."""
    for who in (BUILDER, REVIEWER):
        presence.put(who, environment=None)
    seats = {agent.id: BUILDER.principal, reviewer.id: REVIEWER.principal}
    async with open_linear(
        linear, linear_url, tmp_path / "bridge", presence=presence, seats=seats
    ) as opened:
        yield opened
