"""Fixtures for the GitHub provider tests: the fake GitHub served on loopback, the token
in the environment, a presence port, and a GitHub endpoint opened on a fresh mirror
(SQLite, or PostgreSQL for the tests that take ``mirror_url``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bridge._support import DictPresence
from tests.conftest import BACKENDS, backend_url
from tests.providers.github._support import (
    HUMAN,
    SEAT_LOGIN,
    TOKEN_ENV,
    GitHubEndpoint,
    open_github,
)
from tests.support.fake_github import FakeGitHub, serve_fake_github


@pytest.fixture
def fake() -> FakeGitHub:
    """A fake GitHub whose clock starts at the real time (the bridge's staleness and the
    fake's rate-limit reset then compare sensibly). ``octobot`` and ``octocat`` can be
    assigned."""
    return FakeGitHub(assignable=[SEAT_LOGIN, HUMAN])


@pytest.fixture(autouse=True)
def github_token(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    return fake.token


@pytest.fixture
async def github_url(fake: FakeGitHub) -> AsyncIterator[str]:
    async with serve_fake_github(fake) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def mirror_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The mirror on each backend, for the tests whose storage side matters."""
    return backend_url(request, tmp_path, "mirror.db")


@pytest.fixture
async def gh(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[GitHubEndpoint]:
    """A GitHub endpoint on a SQLite mirror, nothing synced yet."""
    async with open_github(fake, github_url, tmp_path / "bridge", presence=presence) as opened:
        yield opened
