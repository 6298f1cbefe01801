"""Commits that reference an issue without changing it: GitHub records a ``referenced``
event on the issue (a commit pushed with ``#12`` in its message, with or without a pull
request). GitHub does not say that it moves the issue's ``updated_at``; the fake leaves it
alone, so no listing shows it. The repository's issue events feed
(``GET /repos/{owner}/{repo}/issues/events``) carries those events; it is asked
conditionally (a 304 is not counted by GitHub's rate limit) in a poll whose listing
changed, after a webhook says the repository moved, and else once every
``reference_events_interval_s``, so an unchanged poll is the listing's one request.

A pull request of another repository that references the issue makes a
``cross-referenced`` event, which GitHub shows only in the issue's timeline, never in the
issue events feed: without a webhook or a change of the issue, no request of a fixed cost
finds it (see docs/github.md, Evidence)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from cotal_tasks.bridge.http.webhooks import webhook_routes
from cotal_tasks.providers.github.cadence import MAX_WAIT_S, clock, wait_of
from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.http import TrackerHttp
from tests.providers.github._support import (
    ISSUES,
    REPO,
    SECRET_ENV,
    WEBHOOK_SECRET,
    GitHubEndpoint,
    open_github,
)
from tests.providers.hosted_support import add_issues
from tests.support.fake_github import FakeGitHub, push_payload, signed_webhook

FIXTURES = Path(__file__).parents[2] / "fixtures" / "github"
EVENTS = f"{ISSUES}/events"
OTHER = "octo-org/elsewhere"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
MORE = ("octo-org/widgets", "octo-org/gadgets")  # further repositories of an endpoint
POLL_S = 60  # the poll interval the tests keep
INTERVAL_S = GitHubConfig.model_fields["reference_events_interval_s"].default
FEED = {"reference_events": True}  # the default, which the tests' endpoints turn off
# An unchanged listing, then the feed, which names #3: read with its evidence.
FOUND_3 = [(ISSUES, 304), (EVENTS, 200), (f"{ISSUES}/3", 200), ("/graphql", 200)]


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


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(repos=(REPO, *MORE))


async def test_a_commit_reference_with_no_webhook_is_found_within_the_feeds_interval(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """Before: the commit never reached the task (GitHub leaves ``updated_at`` alone), or,
    with the feed read every poll, it cost every unchanged poll a second request. Now a
    poll with nothing to say the repository moved asks the listing alone, and the feed is
    read once ``reference_events_interval_s`` has passed since its last read."""
    async with open_github(fake, github_url, tmp_path / "b", reference_events=True) as gh:
        gh.virtual_time()  # the tracker's clock is the fake's, moved by hand
        await settled(gh)  # the import read the feed (its mark) at this time
        fake.advance(POLL_S)
        fake.add_commit_reference(REPO, 3, SHA)
        fake.add_commit_reference(REPO, 4, "f" * 40, commit_repo=OTHER)
        mark = len(fake.requests)

        await gh.poll()  # one poll interval after the read: not due yet

        assert statuses(fake, mark) == [(ISSUES, 304)]
        assert await refs(gh, 3) == set()

        fake.advance(INTERVAL_S - POLL_S)  # the interval since the last read is over
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

        fake.advance(POLL_S)
        mark = len(fake.requests)
        await gh.poll()
        assert statuses(fake, mark) == [(ISSUES, 304)]


async def test_sync_reads_the_feed_at_once_and_the_cadence_counts_from_that_read(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """``cotal-tasks sync`` (``Hosted.catch_up``) promises one poll to the tracker's
    present. Before, it was an ordinary poll, which leaves the feed to its cadence: a
    commit referenced just after a poll was missed. Now it reads the feed whatever the
    cadence, and keeps that read in the checkpoint: the poll after it asks the listing
    alone until the interval since the sync's read is over."""
    async with open_github(fake, github_url, tmp_path / "b", reference_events=True) as gh:
        gh.virtual_time()
        await settled(gh)  # the feed was read (the import) at this time
        fake.advance(POLL_S)
        fake.add_commit_reference(REPO, 3, SHA)
        mark = len(fake.requests)

        await gh.hosted.catch_up()

        assert statuses(fake, mark) == FOUND_3
        assert ("commit", SHA) in await refs(gh, 3)

        fake.advance(INTERVAL_S - POLL_S)  # over since the import's read, not the sync's
        mark = len(fake.requests)
        await gh.poll()
        assert statuses(fake, mark) == [(ISSUES, 304)]


async def test_an_unchanged_poll_is_one_conditional_request_per_repository(
    fake: FakeGitHub, github_url: str, tmp_path: Path
) -> None:
    """With the feed on (the default), every poll of a quiet endpoint over several
    repositories asks each repository's listing conditionally and nothing else: one 304 a
    repository, not counted by GitHub's rate limit (it was two: the feed's too)."""
    repos = [REPO, *MORE]
    async with open_github(
        fake, github_url, tmp_path / "b", repository=None, repositories=repos, **FEED
    ) as gh:
        gh.virtual_time()
        for repo in repos:
            add_issues(fake, repo, 3, spacing_s=60)
        await gh.poll()  # the import, which marks each feed
        await gh.poll()  # past the overlap
        for _ in range(3):
            fake.advance(POLL_S)
            mark = len(fake.requests)

            await gh.poll()

            sent = fake.requests[mark:]
            assert [(r.path, r.status) for r in sent] == [
                (f"/repos/{repo}/issues", 304) for repo in repos
            ]
            assert all(r.if_none_match for r in sent)


async def test_a_push_delivery_has_the_next_poll_read_its_repositorys_feed(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit pushed with ``#3`` in its message: the ``push`` delivery names no issue,
    so it refreshes nothing itself, but the next poll reads the feed of the repository it
    names (and only of that one) at once, not at the end of the interval."""
    monkeypatch.setenv(SECRET_ENV, WEBHOOK_SECRET)
    repos = [REPO, *MORE]
    async with open_github(
        fake,
        github_url,
        tmp_path / "b",
        repository=None,
        repositories=repos,
        webhook_secret_env=SECRET_ENV,
        **FEED,
    ) as gh:
        gh.virtual_time()
        add_issues(fake, REPO, 3, spacing_s=60)
        await gh.poll()
        await gh.poll()
        fake.advance(POLL_S)
        fake.add_commit_reference(REPO, 3, SHA)
        body, headers = signed_webhook(
            WEBHOOK_SECRET, "push", push_payload(fake, REPO, SHA, "Fix the parser (#3)")
        )
        hooks = [("github", s.webhook) for s in gh.hosted.sources if s.webhook is not None]
        app = Starlette(routes=webhook_routes(hooks))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as http:
            answer = await http.post("/webhooks/github", content=body, headers=headers)
        assert answer.status_code == 202, answer.text
        mark = len(fake.requests)

        await gh.poll()

        assert statuses(fake, mark) == [
            *FOUND_3,
            *((f"/repos/{repo}/issues", 304) for repo in MORE),
        ]
        assert ("commit", SHA) in await refs(gh, 3)


def test_the_feeds_cadence_honours_x_poll_interval() -> None:
    """A read asked (the listing changed, a webhook) waits no less than the
    ``X-Poll-Interval`` the feed's last answer asked; the interval itself never less."""
    never = clock({})
    read = clock(never.read(1000.0, wait_of("90"), None))
    assert not read.due(1060.0, 300, asked=True)
    assert read.due(1090.0, 300, asked=True)
    assert not read.due(1090.0, 300, asked=False)
    assert read.due(1300.0, 300, asked=False)
    slow = clock(never.read(1000.0, wait_of("600"), None))
    assert not slow.due(1300.0, 300, asked=False)
    assert (wait_of(None), wait_of("soon"), wait_of("86400")) == (0.0, 0.0, MAX_WAIT_S)
    assert clock(read.held("github:d1")).asked(changed=False, moved=None)
    assert set(read.held("github:d1")) == {"issue_events_owed", "issue_events_moved"}


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
