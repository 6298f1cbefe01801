"""GraphQL contained: whatever GitHub's GraphQL endpoint answers, the REST mirror goes on
and no issue loses its evidence for good (findings 6 and 12).

Recorded wordings:

- the newer rate-limit answer, ``{"errors":[{"type":"RATE_LIMIT","code":
  "graphql_rate_limit","message":"API rate limit already exceeded for user ID
  xxxxx."}]}`` (HTTP 200), as reported from github.com in yanyongyu/githubkit#271;
- the transient "Something went wrong while executing your query. This may be the result
  of a timeout, or it could be a GitHub bug. Please include `…` when reporting this
  issue." (HTTP 200, ``data: null``), the wording octokit's plugin-retry retries.
"""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.providers.hosted.http import RateLimited
from tests.providers.github._support import REPO, GitHubEndpoint

Json = dict[str, Any]
TRANSIENT: Json = {
    "data": None,
    "errors": [
        {
            "message": "Something went wrong while executing your query. This may be the "
            "result of a timeout, or it could be a GitHub bug. Please include "
            "`E4D2:3B5E:1A2B3C:1D2E3F:5F4E3D2C` when reporting this issue."
        }
    ],
}
RATE_LIMIT: Json = {
    "errors": [
        {
            "type": "RATE_LIMIT",
            "code": "graphql_rate_limit",
            "message": "API rate limit already exceeded for user ID 583231.",
        }
    ]
}


def linked_issue(gh: GitHubEndpoint) -> None:
    """Issue #1, and pull request #2 that references it (evidence read over GraphQL)."""
    gh.fake.add_issue(REPO, "Crash in the parser")
    gh.fake.advance(10)
    gh.fake.add_pull(
        REPO, "Fix the parser", "Fixes #1", head_ref="fix-parser", references=[(REPO, 1)]
    )
    gh.fake.advance(10)


async def refs(gh: GitHubEndpoint, number: int) -> set[str]:
    return {e["ref"] for e in (await gh.get(number))["evidence"]}


async def test_a_graphql_endpoint_answering_404_does_not_stop_the_mirror(
    gh: GitHubEndpoint,
) -> None:
    """Finding 6: a 404 from GraphQL (a wrong ``graphql_url``, a server without it, an
    outage) aborted every poll, so nothing was mirrored at all."""
    linked_issue(gh)
    gh.fake.fail_next(50, status=404, message="Not Found", path="/graphql")

    report = await gh.poll()  # no exception: the REST mirror goes on

    assert (await gh.get(1))["title"] == "Crash in the parser"
    degraded = gh.store.degradations()
    assert degraded["counts"].get("evidence-unavailable", 0) >= 1
    assert "GraphQL" in degraded["unavailable"]
    assert report.owed >= 1  # issue 1's evidence is owed
    assert gh.store.health.failing is None

    gh.fake.failures.clear()  # GraphQL answers again
    gh.fake.advance(5)
    await gh.poll()

    assert "https://github.com/octo-org/hello-world/pull/2" in await refs(gh, 1)
    assert "unavailable" not in gh.store.degradations()
    assert (await gh.checkpoint()).get("owed") == []


async def test_a_transient_graphql_error_is_retried_and_loses_no_evidence(
    gh: GitHubEndpoint,
) -> None:
    """Finding 12: one "Something went wrong" answer was taken as a permanent refusal and
    the issues of that batch were never read for evidence again."""
    gh.virtual_time()  # the backoff waits move the fake's clock, not the test's
    linked_issue(gh)
    gh.fake.graphql_answers.append(TRANSIENT)

    await gh.poll()

    assert "https://github.com/octo-org/hello-world/pull/2" in await refs(gh, 1)
    assert "evidence-unavailable" not in gh.store.degradations()["counts"]


async def test_a_transient_error_past_its_retries_is_read_again_on_a_later_poll(
    gh: GitHubEndpoint,
) -> None:
    gh.virtual_time()
    linked_issue(gh)
    gh.fake.graphql_answers.extend([TRANSIENT] * 12)

    await gh.poll()
    assert "https://github.com/octo-org/hello-world/pull/2" not in await refs(gh, 1)
    gh.fake.graphql_answers.clear()
    gh.fake.advance(5)
    await gh.poll()  # nothing changed on GitHub: the owed issue is read all the same

    assert "https://github.com/octo-org/hello-world/pull/2" in await refs(gh, 1)


async def test_the_newer_rate_limit_wording_is_a_rate_limit(gh: GitHubEndpoint) -> None:
    """Finding 12: ``type: RATE_LIMIT`` (code ``graphql_rate_limit``) was not recognised
    as a rate limit, and the batch's evidence was lost the same way."""
    linked_issue(gh)
    gh.fake.graphql_answers.append(RATE_LIMIT)

    with pytest.raises(RateLimited):  # the poll waits out the limit, then resumes
        await gh.poll()
    gh.fake.advance(60)
    await gh.poll()

    assert "https://github.com/octo-org/hello-world/pull/2" in await refs(gh, 1)
