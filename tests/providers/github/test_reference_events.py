"""Commits that reference an issue without changing it: GitHub records a ``referenced``
event on the issue (a commit pushed with ``#12`` in its message, with or without a pull
request). GitHub does not say that it moves the issue's ``updated_at``; the fake leaves it
alone, so no listing shows it. The repository's issue events feed
(``GET /repos/{owner}/{repo}/issues/events``) carries those events; it is asked
conditionally each poll, and a 304 is not counted by GitHub's rate limit.

A pull request of another repository that references the issue makes a
``cross-referenced`` event, which GitHub shows only in the issue's timeline, never in the
issue events feed: without a webhook or a change of the issue, no request of a fixed cost
finds it (see docs/github.md, Evidence)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.hosted.http import TrackerHttp
from tests.providers.github._support import ISSUES, REPO, GitHubEndpoint, open_github
from tests.providers.hosted_support import add_issues
from tests.support.fake_github import FakeGitHub

FIXTURES = Path(__file__).parents[2] / "fixtures" / "github"
EVENTS = f"{ISSUES}/events"
OTHER = "octo-org/elsewhere"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


async def refs(gh: GitHubEndpoint, number: int) -> set[tuple[str, str]]:
    return {(e["kind"], e["ref"]) for e in (await gh.get(number))["evidence"]}


def statuses(fake: FakeGitHub, since: int) -> list[tuple[str, int]]:
    return [(r.path, r.status) for r in fake.requests[since:]]


async def settled(gh: GitHubEndpoint, issues: int = 5) -> None:
    add_issues(gh.fake, REPO, issues, spacing_s=60)
    await gh.poll()  # the import marks the events feed
    await gh.poll()  # past the overlap


# -- the recorded shape --------------------------------------------------------------------


def recorded_events() -> list[dict[str, Any]]:
    """``components/examples/issue-event-items``: the repository's issue events list. Its
    one item is an event of pull request 1347 (its ``issue`` carries ``pull_request``)."""
    events = json.loads((FIXTURES / "openapi-issue-event-items.json").read_text())
    assert isinstance(events, list)
    return events


def on_an_issue(recorded: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The recorded event moved onto an issue (its ``issue`` without ``pull_request``)."""
    issue = {k: v for k, v in recorded["issue"].items() if k != "pull_request"}
    return {**recorded, "issue": issue, **changes}


async def read_feed(pages: list[list[dict[str, Any]]], seen: int | None) -> tuple[Any, int]:
    """``referenced_since`` over ``pages`` served in order (with ``Link`` headers)."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        index = int(request.url.params.get("page", "1")) - 1
        headers = {"etag": f'"feed-{index}"'}
        if index + 1 < len(pages):
            following = request.url.copy_merge_params({"page": str(index + 2)})
            headers["link"] = f'<{following}>; rel="next"'
        return httpx.Response(200, json=pages[index], headers=headers)

    client = github_http_client("https://api.github.com", "ghp_secret", 5)
    client._transport = httpx.MockTransport(answer)
    try:
        read = await GitHubClient(TrackerHttp(client, github_retry), "o/r").referenced_since(
            seen, None
        )
    finally:
        await client.aclose()
    return read, len(sent)


async def test_a_referenced_event_of_the_recorded_shape_names_its_issue() -> None:
    """The recorded item, a ``closed`` event of pull request 1347, names nothing: a pull
    request is never a task, and a closing changes the issue (the walk sees it). As a
    ``referenced`` event of an issue it names that issue."""
    (recorded,) = recorded_events()
    referenced = on_an_issue(recorded, id=2, event="referenced")
    on_a_pull = {**recorded, "id": 3, "event": "referenced"}
    closed = on_an_issue(recorded)

    read, requests = await read_feed([[on_a_pull, referenced, closed]], seen=0)

    assert (read.referenced, read.newest, read.etag, requests) == (
        frozenset({1347}),
        3,
        '"feed-0"',
        1,
    )


async def test_the_feed_is_read_only_back_to_the_last_event_seen() -> None:
    (recorded,) = recorded_events()
    number = recorded["issue"]["number"]
    issue = on_an_issue(recorded)["issue"]
    newer = [
        on_an_issue(recorded, id=n, event="referenced", issue={**issue, "number": n})
        for n in (250, 249)
    ]
    older = [on_an_issue(recorded, id=120, event="referenced")]

    read, requests = await read_feed([newer, older], seen=249)
    assert (read.referenced, read.newest, requests) == (frozenset({250}), 250, 1)

    read, requests = await read_feed([newer, older], seen=200)  # the second page says so
    assert (read.referenced, read.newest, requests) == (frozenset({250, 249}), 250, 2)

    read, requests = await read_feed([newer, older], seen=100)
    assert (read.referenced, requests) == (frozenset({250, 249, number}), 2)

    read, requests = await read_feed([newer, older], seen=None)  # the first read: a mark
    assert (read.referenced, read.newest, requests) == (frozenset(), 250, 1)


# -- over the fake GitHub ---------------------------------------------------------------------


async def test_a_commit_reference_without_a_pull_request_becomes_evidence(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """Before: the commit never reached the task (GitHub leaves ``updated_at`` alone)."""
    async with open_github(fake, github_url, tmp_path / "b", reference_events=True) as gh:
        await settled(gh)
        fake.advance(60)
        fake.add_commit_reference(REPO, 3, SHA)
        fake.add_commit_reference(REPO, 4, "f" * 40, commit_repo=OTHER)
        mark = len(fake.requests)

        await gh.poll()

        # The listing did not change; the feed did. The two issues are read, their
        # evidence in one GraphQL request.
        assert statuses(fake, mark) == [
            (ISSUES, 304),
            (EVENTS, 200),
            (f"{ISSUES}/3", 200),
            (f"{ISSUES}/4", 200),
            ("/graphql", 200),
        ]
        assert ("commit", SHA) in await refs(gh, 3)
        assert ("commit", f"{OTHER}@{'f' * 40}") in await refs(gh, 4)
        assert await refs(gh, 2) == set()

        mark = len(fake.requests)
        await gh.poll()
        assert [s for _, s in statuses(fake, mark)] == [304, 304]


async def test_an_unchanged_poll_is_two_conditional_requests(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """With the feed read, an unchanged poll asks it and the listing conditionally: two
    304s, neither counted by GitHub's rate limit (``reference_events = false``: one)."""
    async with open_github(fake, github_url, tmp_path / "b", reference_events=True) as gh:
        await settled(gh)
        fake.advance(60)
        mark = len(fake.requests)

        await gh.poll()

        sent = fake.requests[mark:]
        assert [(r.path, r.status) for r in sent] == [(ISSUES, 304), (EVENTS, 304)]
        assert all(r.if_none_match for r in sent)


async def test_a_changed_issue_is_read_once_even_when_a_commit_named_it(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """A commit closes #2 (``closed`` with its sha, which moves ``updated_at``) and
    references #2: the walk reads its timeline with the page, and nothing reads it again."""
    async with open_github(fake, github_url, tmp_path / "b", reference_events=True) as gh:
        await settled(gh)
        fake.advance(60)
        fake.add_commit_reference(REPO, 2, SHA)
        fake.close_issue(REPO, 2, commit_id=SHA)
        mark = len(fake.requests)

        await gh.poll()

        assert [p for p, _ in statuses(fake, mark) if p.startswith(f"{ISSUES}/2")] == []
        assert ("commit", SHA) in await refs(gh, 2)
        assert (await gh.get(2))["status"] == "done"


async def test_without_the_feed_the_walk_never_sees_a_commit_reference(
    gh: GitHubEndpoint,
) -> None:
    """What the feed is for: a commit reference moves no ``updated_at``, so the listing
    stays unchanged (304) and the link stays unknown, poll after poll."""
    fake = gh.fake
    await settled(gh)
    fake.advance(60)
    fake.add_commit_reference(REPO, 3, SHA)

    for _ in range(2):
        mark = len(fake.requests)
        await gh.poll()
        assert statuses(fake, mark) == [(ISSUES, 304)]
    assert await refs(gh, 3) == set()
