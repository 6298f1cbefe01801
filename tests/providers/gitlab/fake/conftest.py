"""Fixtures of the fake's own tests: the fake on a pinned clock, and an in-process client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.providers.gitlab.fake._support import START
from tests.support.fake_gitlab import FakeClock, FakeGitLab


@pytest.fixture
def fake() -> FakeGitLab:
    return FakeGitLab(clock=FakeClock(START))


@pytest.fixture
async def client(fake: FakeGitLab) -> AsyncIterator[httpx.AsyncClient]:
    async with fake.client() as client:
        yield client
