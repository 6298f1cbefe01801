"""GitHub items in the odd shapes real repositories have: a branch named like a credential,
items of no known shape on a page, issues from before 2013, transferred and deleted
issues, and a ``Link`` header that points to another origin. None of them stops the sync,
each degradation is counted, and the token never leaves the configured origin."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError
from tests.providers.github._support import REPO, GitHubEndpoint, task_id
from tests.providers.hosted_support import add_issues

Json = dict[str, Any]
CREDENTIAL_BRANCH = "fix/token=refresh"  # a legal git ref that TaskText refuses


async def test_a_branch_named_like_a_credential_does_not_stop_the_sync(
    gh: GitHubEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    fake = gh.fake
    add_issues(fake, REPO, 3)
    await gh.poll()
    fake.advance(60)
    odd = fake.add_pull(REPO, "Refresh tokens", head_ref=CREDENTIAL_BRANCH, closes=[1])
    fine = fake.add_pull(REPO, "Fix 2", head_ref="fix-2", closes=[2])
    caplog.set_level(logging.WARNING)

    report = await gh.poll()  # before: ValidationError out of the poll, #2 starved

    assert report.changed == 2  # both linked issues, their evidence read with the walk
    one, two = await gh.get(1), await gh.get(2)
    assert [(e["kind"], e["ref"]) for e in one["evidence"]] == [("review", odd["html_url"])]
    assert ("branch", "fix-2") in [(e["kind"], e["ref"]) for e in two["evidence"]]
    assert ("review", fine["html_url"]) in [(e["kind"], e["ref"]) for e in two["evidence"]]
    assert (await gh.checkpoint()).get("pending") == []  # nothing left owed
    assert gh.store.degradations()["counts"] == {"evidence-refused": 1}
    assert CREDENTIAL_BRANCH not in caplog.text
    assert await gh.store.freshness() is None


def with_items(response: httpx.Response, extra: list[Any]) -> httpx.Response:
    """``response`` with ``extra`` items appended to its JSON list."""
    return httpx.Response(
        response.status_code,
        headers={k: v for k, v in response.headers.items() if k != "content-length"},
        json=[*response.json(), *extra],
        request=response.request,
    )


LEGACY = {  # an issue from before 2013, as the REST API still shows it
    "number": 4,
    "title": "From the old days",
    "body": "Filed in 2011",
    "state": "closed",
    "state_reason": None,
    "labels": [],
    "assignees": [],
    "created_at": "2011-04-22T13:33:48Z",
    "updated_at": "2012-10-10T09:10:11Z",
    "pull_request": {"html_url": None, "diff_url": None, "patch_url": None},
}


async def test_items_of_no_known_shape_are_skipped_and_legacy_issues_kept(
    gh: GitHubEndpoint,
) -> None:
    fake = gh.fake
    add_issues(fake, REPO, 3)
    client = gh.tracker.client  # type: ignore[attr-defined]
    pages = client.issue_pages

    async def odd_pages(since: str | None, etag: Any) -> AsyncIterator[httpx.Response]:
        async for response in pages(since, etag):
            yield with_items(response, [LEGACY, "not an issue", {"number": "x"}, {"title": 5}])

    client.issue_pages = odd_pages

    report = await gh.poll()  # before: an AttributeError out of the poll

    assert report.issues == 4
    tasks = {task["taskId"]: task for task in await gh.all_tasks()}
    assert sorted(tasks) == [task_id(n) for n in (1, 2, 3, 4)]
    assert (tasks[task_id(4)]["title"], tasks[task_id(4)]["status"]) == (
        "From the old days",
        "done",
    )  # before: dropped as a pull request
    assert gh.store.degradations()["counts"] == {"item-unmappable": 3}


async def test_transferred_and_deleted_issues_become_dropped(gh: GitHubEndpoint) -> None:
    fake = gh.fake
    add_issues(fake, REPO, 3)
    await gh.poll()
    kept = await gh.get(1)
    fake.advance(60)
    fake.transfer_issue(REPO, 1, "octo-org/elsewhere")
    fake.delete_issue(REPO, 2)

    assert await gh.sync.refresh([1, 2, 3]) == (3, 2)  # e.g. woken by the issues webhook

    moved, deleted = await gh.get(1), await gh.get(2)
    assert (moved["status"], moved["statusSource"]) == ("dropped", "transferred")
    assert (deleted["status"], deleted["statusSource"]) == ("dropped", "deleted")
    assert moved["title"] == kept["title"]  # the rest of the record as it was
    assert (await gh.get(3))["status"] == "open"
    assert await gh.sync.refresh([1, 2]) == (2, 0)  # read again: nothing new


async def test_a_link_to_another_origin_is_never_followed_with_the_token() -> None:
    sent: list[httpx.URL] = []

    since = "2026-11-30T06:43:14Z"
    tied = [{"number": n, "updated_at": since} for n in (1, 2)]  # stepped by its link

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url)
        next_url = "https://collector.example/repos/o/r/issues?page=2"
        return httpx.Response(200, json=tied, headers={"link": f'<{next_url}>; rel="next"'})

    client = github_http_client("https://api.github.com", "ghp_secret", 5)
    client._transport = httpx.MockTransport(answer)  # the token header stays as built
    github = GitHubClient(TrackerHttp(client, github_retry), "o/r")
    try:
        with pytest.raises(TrackerHttpError) as refused:
            async for _ in github.issue_pages(since, None):
                pass
    finally:
        await client.aclose()

    assert [url.host for url in sent] == ["api.github.com"]  # before: the collector got it
    assert "https://collector.example" in refused.value.message
    assert "api_url" in refused.value.message


async def test_a_renamed_repository_is_not_taken_for_transferred_issues() -> None:
    """After a rename, GitHub answers 301 for the issue and for the repository itself:
    that is not a transfer, so no task is dropped; the error names the remedy."""
    moved = "https://api.github.com/repositories/1296269"

    def answer(request: httpx.Request) -> httpx.Response:
        location = moved + request.url.path.removeprefix("/repos/o/r")
        return httpx.Response(
            301, json={"message": "Moved Permanently"}, headers={"location": location}
        )

    client = github_http_client("https://api.github.com", "ghp_secret", 5)
    client._transport = httpx.MockTransport(answer)
    github = GitHubClient(TrackerHttp(client, github_retry), "o/r")
    try:
        with pytest.raises(TrackerHttpError) as refused:
            await github.get_issue(7)
    finally:
        await client.aclose()

    assert refused.value.status == 301
    assert "name it anew in `repository` or `repositories`" in refused.value.message
