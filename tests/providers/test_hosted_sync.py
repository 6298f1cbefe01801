"""What the GitHub and the GitLab sync do alike when the tracker fails them, run against
each fake on loopback: server errors are retried with backoff and then given up, and a
refusal (bad credentials, no access, no such repository or project) is never retried,
leaves the board stale rather than empty, and never shows the token. Retry waits run on
virtual time (``VirtualTime``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.hosted.http import TrackerHttpError
from tests.providers.github import _support as gh
from tests.providers.gitlab import _support as gl
from tests.providers.hosted_support import HostedEndpoint
from tests.support.fake_github import FakeGitHub, serve_fake_github
from tests.support.fake_gitlab import FakeGitLab, serve_fake_gitlab

Opener = Callable[..., AbstractAsyncContextManager[HostedEndpoint[Any]]]
Script = Callable[[Any], dict[str, Any]]  # scripts the fake; returns endpoint overrides


@dataclass(frozen=True)
class SyncSide:
    name: str  # as the stale reason names it
    place: str  # the repository or project
    listing: str  # the issue listing's path on the fake
    token_env: str
    revoked: str  # a token the fake does not know
    make: Callable[[], Any]
    serve: Callable[[Any], AbstractAsyncContextManager[str]]
    opener: Opener
    refusals: dict[str, Script]  # the refusals the tracker answers a poll with, by case


def _revoked(fake: Any) -> dict[str, Any]:
    return {}  # the test puts the side's ``revoked`` token in the environment


def _absent(key: str, value: str) -> Script:
    return lambda fake: {key: value}


def _refused(status: int, path: str, message: str | None = None) -> Script:
    def script(fake: Any) -> dict[str, Any]:
        fake.fail_next(status=status, message=message, path=path)
        return {}

    return script


SIDES = {
    "github": SyncSide(
        "GitHub",
        gh.REPO,
        gh.ISSUES,
        gh.TOKEN_ENV,
        "ghp_revoked0000000000000000000000000000000",
        lambda: FakeGitHub(assignable=[gh.SEAT_LOGIN, gh.HUMAN]),
        serve_fake_github,
        gh.open_github,
        {
            "401 bad credentials": _revoked,
            "404 no such repository": _absent("repository", "octo-org/no-such-repository"),
            "422 validation failed": _refused(422, gh.ISSUES, "Validation Failed"),
            "403 not a rate limit": _refused(
                403, gh.ISSUES, "Resource not accessible by personal access token"
            ),
        },
    ),
    "gitlab": SyncSide(
        "GitLab",
        gl.PROJECT,
        gl.ISSUES,
        gl.TOKEN_ENV,
        "glpat-revoked00000000000",
        lambda: FakeGitLab(),
        serve_fake_gitlab,
        gl.open_gitlab,
        {
            "401 revoked token": _revoked,
            "403 no access": _refused(403, gl.ISSUES),
            "404 no such project": _absent("project", "acme/no-such-project"),
        },
    ),
}
REFUSALS = [(name, case) for name, side in SIDES.items() for case in side.refusals]


@pytest.fixture(params=list(SIDES))
def side(request: pytest.FixtureRequest) -> SyncSide:
    return SIDES[request.param]


@pytest.fixture
def fake(side: SyncSide, monkeypatch: pytest.MonkeyPatch) -> Any:
    tracker = side.make()
    monkeypatch.setenv(side.token_env, tracker.token)
    return tracker


@pytest.fixture
async def api_url(side: SyncSide, fake: Any) -> AsyncIterator[str]:
    async with side.serve(fake) as url:
        yield url


def listing_statuses(side: SyncSide, fake: Any) -> list[int]:
    return [r.status for r in fake.requests if r.matches("GET", side.listing)]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_are_retried(
    side: SyncSide, fake: Any, api_url: str, tmp_path: Path, status: int
) -> None:
    fake.bulk_issues(side.place, 20)
    async with side.opener(fake, api_url, tmp_path / "b") as endpoint:
        clock = endpoint.virtual_time()
        fake.fail_next(2, status=status, path=side.listing)

        report = await endpoint.poll()

        assert listing_statuses(side, fake) == [status, status, 200]
        assert len(clock.waits) == 2
        assert clock.waits[0] <= 1.0
        assert clock.waits[1] <= 2.0  # exponential backoff with jitter
        assert report.issues == 20
        assert "stale" not in await endpoint.client.list_tasks()


async def test_server_errors_give_up_after_max_retries(
    side: SyncSide, fake: Any, api_url: str, tmp_path: Path
) -> None:
    fake.bulk_issues(side.place, 20)
    async with side.opener(fake, api_url, tmp_path / "b", max_retries=2) as endpoint:
        endpoint.virtual_time()
        fake.fail_next(5, status=503, retry_after=None, path=side.listing)
        with pytest.raises(TrackerHttpError) as failed:
            await endpoint.poll()
        assert failed.value.status == 503
        assert listing_statuses(side, fake) == [503, 503, 503]
        assert "stale" in await endpoint.client.list_tasks()


@pytest.mark.parametrize(("side", "case"), REFUSALS, indirect=["side"])
async def test_refusals_are_never_retried(
    side: SyncSide,
    case: str,
    fake: Any,
    api_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    status = int(case.split()[0])
    fake.bulk_issues(side.place, 5)
    overrides = side.refusals[case](fake)
    if status == 401:
        monkeypatch.setenv(side.token_env, side.revoked)
    caplog.set_level(logging.DEBUG)
    async with side.opener(fake, api_url, tmp_path / "b", **overrides) as endpoint:
        clock = endpoint.virtual_time()
        with pytest.raises(TrackerHttpError) as failed:
            await endpoint.poll()
        assert failed.value.status == status
        assert [r.status for r in fake.requests] == [status]
        assert clock.waits == []
        page = await endpoint.client.list_tasks()
        assert page["tasks"] == []
        assert page["stale"]["reason"].startswith(f"{side.name} sync is failing")
    revoked = side.revoked[: side.revoked.index("revoked") + len("revoked")]  # any part
    for secret in (fake.token, revoked):
        assert secret not in caplog.text
        assert secret not in str(failed.value)
