"""Fixtures of the fake's own tests: the fake on a pinned clock, and an in-process client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.providers.github.fake._support import START
from tests.support.fake_github import FakeClock, FakeGitHub


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(clock=FakeClock(START), assignable=["octocat"])


@pytest.fixture
async def client(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    async with fake.client() as client:
        yield client
