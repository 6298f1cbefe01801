"""Fixtures for the GitLab provider tests: the fake GitLab served on loopback, the token in
the environment, a presence port, and a GitLab endpoint opened on a fresh SQLite mirror.

The fixture is ``gitlab`` (not ``fake``), so the fake's own tests in this folder keep
their ``fake`` with its pinned clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import (
    HUMAN,
    REVIEWER_USER,
    SEAT_USER,
    TOKEN_ENV,
    GitLabEndpoint,
    open_gitlab,
)
from tests.support.fake_gitlab import FakeGitLab, serve_fake_gitlab


@pytest.fixture
def gitlab() -> FakeGitLab:
    """A fake GitLab whose clock starts at the real time (the bridge's staleness and the
    fake's rate-limit reset then compare sensibly), with the seat accounts and a human."""
    fake = FakeGitLab()
    for username in (SEAT_USER, REVIEWER_USER, HUMAN):
        fake.add_user(username)
    return fake


@pytest.fixture
def gitlab_token(gitlab: FakeGitLab, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, gitlab.token)
    return gitlab.token


@pytest.fixture
async def gitlab_url(gitlab: FakeGitLab, gitlab_token: str) -> AsyncIterator[str]:
    async with serve_fake_gitlab(gitlab) as url:
        yield url


@pytest.fixture
async def gl(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[GitLabEndpoint]:
    """A GitLab endpoint on a SQLite mirror, nothing synced yet."""
    async with open_gitlab(gitlab, gitlab_url, tmp_path / "bridge", presence=presence) as opened:
        yield opened
