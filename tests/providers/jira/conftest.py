"""Fixtures for the Jira provider tests: the fake Jira on loopback, its token in the
environment, and a Jira endpoint opened on a fresh SQLite mirror."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bridge._support import DictPresence
from tests.providers.jira._support import TOKEN_ENV, JiraEndpoint, make_fake, open_jira
from tests.support.fake_jira import FakeJira
from tests.support.fake_tracker import serve_on_loopback


@pytest.fixture
def jira() -> FakeJira:
    return make_fake()


@pytest.fixture(autouse=True)
def jira_token(jira: FakeJira, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, jira.token)
    return jira.token


@pytest.fixture
async def jira_url(jira: FakeJira) -> AsyncIterator[str]:
    async with serve_on_loopback(jira) as url:
        yield url


@pytest.fixture
async def jr(
    jira: FakeJira, jira_url: str, tmp_path: Path, presence: DictPresence
) -> AsyncIterator[JiraEndpoint]:
    """A Jira endpoint on a SQLite mirror, nothing synced yet."""
    async with open_jira(jira, jira_url, tmp_path / "bridge", presence=presence) as opened:
        yield opened
