"""The rate-limit budget the shared tracker HTTP layer reads from every answer, against
each fake tracker on loopback with its own spelling of the headers: GitHub's
``x-ratelimit-*`` (with its pool, ``x-ratelimit-resource``), GitLab's ``RateLimit-*``
(sometimes absent), and Jira Cloud's ``X-RateLimit-*`` (an ISO 8601 reset, on a 429;
nothing on a plain answer, so its budget stays unknown)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cotal_tasks.providers.github.client import github_http_client, github_retry
from cotal_tasks.providers.gitlab.client import gitlab_http_client, gitlab_retry
from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttp
from cotal_tasks.providers.hosted.ratelimit import MAX_POOLS, keep_budget, read_budget
from cotal_tasks.providers.jira.client import JiraRetry, jira_http_client
from cotal_tasks.providers.provider import RateBudget
from tests.support.fake_github import FakeGitHub, serve_fake_github
from tests.support.fake_gitlab import FakeGitLab, serve_fake_gitlab
from tests.support.fake_jira import FakeJira
from tests.support.fake_tracker import serve_on_loopback


async def test_github_reports_the_budget_of_each_pool() -> None:
    fake = FakeGitHub()
    fake.add_repo("octo-org/hello-world")
    fake.set_rate_limit(4321, limit=5000, reset_in=1800)
    async with serve_fake_github(fake) as api_url:
        http = TrackerHttp(github_http_client(api_url, fake.token, 5.0), github_retry)
        assert http.rate_budgets == {}
        await http.request("GET", "repos/octo-org/hello-world/issues")
        await http.request("GET", "repos/octo-org/hello-world/issues")
        await http.client.aclose()
    budget = http.rate_budgets["core"]
    assert list(http.rate_budgets) == ["core"]
    assert (budget.remaining, budget.limit) == (fake.rate_remaining, 5000)
    assert fake.rate_remaining == 4319  # the latest answer's, not the first
    assert budget.reset_ms == fake.rate_reset * 1000
    assert budget.to_json()["resource"] == "core"


async def test_gitlab_reports_its_budget_and_none_when_it_omits_the_headers() -> None:
    fake = FakeGitLab()
    async with serve_fake_gitlab(fake) as api_url:
        http = TrackerHttp(gitlab_http_client(api_url, fake.token, 5.0), gitlab_retry)
        await http.request("GET", "user")
        budget = http.rate_budgets[""]
        assert (budget.remaining, budget.limit) == (fake.rate_remaining, fake.rate_limit)
        assert budget.reset_ms == fake.rate_reset * 1000
        assert "resource" not in budget.to_json()  # GitLab names no pool

        fake.omit_rate_limit_headers()
        quiet = TrackerHttp(gitlab_http_client(api_url, fake.token, 5.0), gitlab_retry)
        await quiet.request("GET", "user")
        assert quiet.rate_budgets == {}  # not reported: unknown, never a guess
        await http.request("GET", "user")
        assert http.rate_budgets[""] == budget  # the latest one reported is kept
        await http.client.aclose()
        await quiet.client.aclose()


async def test_jira_reports_a_budget_only_where_it_sends_one() -> None:
    fake = FakeJira()
    async with serve_on_loopback(fake) as site:
        client = jira_http_client(site, fake.token, 5.0, email=fake.email)
        http = TrackerHttp(client, JiraRetry(), max_wait_s=1.0)
        await http.request("GET", "rest/api/3/myself")
        assert http.rate_budgets == {}  # a plain answer: no headers, the budget unknown

        fake.fail_next(status=429, retry_after=30)
        with pytest.raises(RateLimited):
            await http.request("GET", "rest/api/3/myself")
        await client.aclose()
    budget = http.rate_budgets[""]
    assert (budget.remaining, budget.limit) == (0, 100)
    reset = datetime.fromtimestamp(fake.clock.seconds + 30, UTC).replace(second=0)
    assert budget.reset_ms == round(reset.timestamp() * 1000)  # ISO 8601, to the minute


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"RateLimit-Remaining": "7", "RateLimit-Reset": "90"}, (7, None, 1_000_000_090_000)),
        ({"x-ratelimit-remaining": "7", "x-ratelimit-limit": "ten"}, (7, None, None)),
        (
            {"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "Sun, 09 Sep 2001 01:48:20 GMT"},
            (3, None, 1_000_000_100_000),
        ),
        ({"x-ratelimit-remaining": "-1"}, None),
        ({"x-ratelimit-remaining": "9" * 13}, None),
        ({"x-ratelimit-remaining": "5", "x-ratelimit-reset": "soon"}, (5, None, None)),
        (  # Linear's reset: epoch milliseconds, 13 digits
            {"X-RateLimit-Requests-Remaining": "7", "X-RateLimit-Requests-Reset": "1796623662922"},
            (7, None, 1_796_623_662_922),
        ),
    ],
)
def test_header_values_are_read_within_bounds(
    headers: dict[str, str], expected: tuple[int, int | None, int | None] | None
) -> None:
    """A small reset is seconds from now; a malformed value is unknown, never a guess."""
    lowered = {name.lower(): value for name, value in headers.items()}
    budget = read_budget(lowered, 1_000_000_000.0)
    got = None if budget is None else (budget.remaining, budget.limit, budget.reset_ms)
    assert got == expected


def test_the_pools_kept_are_bounded() -> None:
    kept: dict[str, RateBudget] = {}
    for n in range(MAX_POOLS + 5):
        keep_budget(kept, {"x-ratelimit-remaining": "1", "x-ratelimit-resource": f"p{n}"}, 0.0)
    keep_budget(kept, {"x-ratelimit-remaining": "1", "x-ratelimit-resource": "p" * 41}, 0.0)
    assert len(kept) == MAX_POOLS
    keep_budget(kept, {"x-ratelimit-remaining": "0", "x-ratelimit-resource": "p0"}, 0.0)
    assert kept["p0"].remaining == 0  # a known pool is still updated
