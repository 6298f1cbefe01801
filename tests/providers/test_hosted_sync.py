"""What the GitHub, GitLab, Jira and Linear syncs do alike, run against each fake on
loopback: a task is never closed because its issue went missing from a poll, but an issue
read one by one that is gone (while the listing still reads) is dropped as deleted, and a
404 while the listing does not read either changes nothing; server errors are retried
with backoff and then given up; and a refusal (bad credentials, no access, no such
repository or project) is never retried, leaves the board stale rather than empty, and
never shows the token. Retry waits run on virtual time (``VirtualTime``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttpError
from tests.providers.github import _support as gh
from tests.providers.gitlab import _support as gl
from tests.providers.hosted_support import HostedEndpoint, VirtualTime, add_issues
from tests.providers.jira import _support as jr
from tests.support.trackers import Side

LINEAR_ISSUES = "/graphql/Issues"
Script = Callable[[Any], dict[str, Any]]  # scripts the fake; returns endpoint overrides


def _revoked(fake: Any) -> dict[str, Any]:
    return {}  # the test puts a revoked token in the environment


def _absent(key: str, value: str) -> Script:
    return lambda fake: {key: value}


def _refused(status: int, path: str, message: str | None = None) -> Script:
    def script(fake: Any) -> dict[str, Any]:
        fake.fail_next(status=status, message=message, path=path)
        return {}

    return script


# The refusals each tracker answers a poll with, by case (the status comes first).
REFUSALS: dict[str, dict[str, Script]] = {
    "github": {
        "401 bad credentials": _revoked,
        "404 no such repository": _absent("repository", "octo-org/no-such-repository"),
        "422 validation failed": _refused(422, gh.ISSUES, "Validation Failed"),
        "403 not a rate limit": _refused(
            403, gh.ISSUES, "Resource not accessible by personal access token"
        ),
    },
    "gitlab": {
        "401 revoked token": _revoked,
        "403 no access": _refused(403, gl.ISSUES),
        "404 no such project": _absent("project", "acme/no-such-project"),
    },
    "jira": {
        "401 revoked token": _revoked,
        "403 no access": _refused(403, jr.SEARCH, "You do not have permission."),
        "400 no such project": _refused(
            400, jr.SEARCH, "The value 'NOPE' does not exist for the field 'project'."
        ),
    },
    "linear": {
        "401 revoked key": _revoked,
        "403 no access": _refused(403, LINEAR_ISSUES, "Forbidden"),
        "400 a filter Linear refuses": _refused(400, LINEAR_ISSUES, "Invalid filter"),
    },
}
REVOKED = {
    "github": "ghp_revoked0000000000000000000000000000000",
    "gitlab": "glpat-revoked00000000000",
    "jira": "ATATT3xFfGF0-revoked-api-token",
    "linear": "lin_api_revoked" + "0" * 33,
}


def listing_statuses(side: Side, fake: Any) -> list[int]:
    return [r.status for r in side.listings(fake)]


async def test_a_task_is_never_closed_because_its_issue_is_missing(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    side, fake, api_url = tracker_side, tracker_fake, tracker_url
    for k in range(1, 6):
        side.add_issue(fake, f"Issue {k}", f"Issue {k}, in full.")
        fake.advance(60)
    async with side.open(fake, api_url, tmp_path / "b") as endpoint:
        await endpoint.poll()
        kept, seq = await endpoint.get(3), await endpoint.seq()
        fake.advance(60)
        side.remove(fake, 3)
        side.touch(fake, 4)  # updated, but nothing the record carries changed
        side.retitle(fake, side.issue_titled(fake, "Issue 5"), "Issue 5, retitled")
        four = await endpoint.get(4)

        report = await endpoint.poll()

        # #4 and #5; #3 is not on the page. GitHub's changed poll reads the page its
        # conditional request brought, which holds #1 and #2 too (test_changed_poll).
        assert report.issues == (4 if side.name == "GitHub" else 2)
        assert await endpoint.get(3) == kept
        assert await endpoint.get(4) == four
        assert (await endpoint.get(5))["title"] == "Issue 5, retitled"
        assert await endpoint.seq() == seq + 1  # #5's title alone
        assert len(await endpoint.all_tasks()) == 5


# How an issue leaves without a trace, by tracker, named by the status its GET answers then.
GONE: dict[str, dict[str, Callable[[Any, int], object]]] = {
    "github": {
        "410 deleted": lambda fake, n: fake.delete_issue(gh.REPO, n),
        "404 gone": lambda fake, n: fake.repos[gh.REPO].issues.pop(n),
    },
    "gitlab": {"404 deleted": lambda fake, n: fake.delete_issue(gl.PROJECT, n)},
    "jira": {"404 deleted": lambda fake, n: fake.delete_issue(n)},
}  # Linear's deletions: tests/providers/linear/test_sync.py (its numbers pack the team key)


@pytest.mark.parametrize(
    ("tracker_side", "case"),
    [(name, case) for name, cases in GONE.items() for case in cases],
    indirect=["tracker_side"],
)
async def test_a_gone_issue_read_one_by_one_is_dropped_as_deleted(
    tracker_side: Side, case: str, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    """Before: a 404 (or 410) left the task as it was. Read one by one (a webhook or the
    reconcile sweep names it) while the listing still reads, the task says it is gone."""
    side, fake = tracker_side, tracker_fake
    add_issues(fake, side.prefix, 5, spacing_s=60)
    async with side.open(fake, tracker_url, tmp_path / "b") as endpoint:
        await endpoint.poll()
        kept, seq = await endpoint.get(3), await endpoint.seq()
        fake.advance(60)
        GONE[side.tracker.provider][case](fake, 3)

        assert await endpoint.sync.refresh([3]) == (1, 1)

        gone = await endpoint.get(3)
        assert (gone["status"], gone["statusSource"]) == ("dropped", "deleted")
        assert (gone["title"], gone["createdAt"]) == (kept["title"], kept["createdAt"])
        assert await endpoint.seq() == seq + 1
        assert await endpoint.sync.refresh([3]) == (1, 0)  # read again: nothing new
        assert await endpoint.sync.refresh([77]) == (1, 0)  # never mirrored: no task
        assert len(await endpoint.all_tasks()) == 5


async def test_a_404_while_the_listing_does_not_read_changes_nothing(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    """A token that lost access (or a wrong repository or project) answers 404 for the
    listing too: that is an error counted for the issue, never a deletion."""
    side, fake = tracker_side, tracker_fake
    add_issues(fake, side.prefix, 5, spacing_s=60)
    async with side.open(fake, tracker_url, tmp_path / "b") as endpoint:
        await endpoint.poll()
        kept = await endpoint.get(2)
        fake.fail_next(status=404, path=side.issue_path(2))
        fake.fail_next(status=404, path=side.probe_path())

        assert await endpoint.sync.refresh([2]) == (0, 0)

        assert await endpoint.get(2) == kept
        assert endpoint.store.degradations()["counts"] == {"issue-unreadable": 1}


@dataclass(frozen=True)
class Bound:
    """A rate limit on each tracker: the budget that lets two listing pages through, the
    status the third gets, the wait a window resetting in 30 s costs (within
    ``max_rate_limit_wait_s``), and the issue the checkpoint stands at when the wait is
    beyond it. ``held``: the tracker's answers announce the budget spent, so the third
    page is held unsent until the reset (``credentials``) instead of being refused."""

    budget: int
    status: int
    waited: tuple[float, float]  # the least and the most the 30 s window is waited
    boundary: int  # the last issue read before the limit
    since: str  # the listing's query parameter for "updated since"
    later: str  # the query parameter a later listing page reads on from
    overrides: tuple[tuple[str, Any], ...] = ()  # the endpoint's, so only listings count
    reread: int = 1  # issues the overlap reads again as news after the resume
    held: bool = True


BOUNDS = {
    # Two list pages and their GraphQL reads; page 2 (since #100's updated_at) reads
    # #100 to #199. The third waits, unsent, until x-ratelimit-reset.
    "github": Bound(4, 403, (29, 30), 199, "since", "since"),
    # Keyset pages #1-#100 and #101-#200; no notes read for the commits that mention them.
    # The third waits, unsent, until RateLimit-Reset.
    "gitlab": Bound(
        2, 429, (29, 30), 200, "updated_after", "cursor", (("commit_mentions", False),)
    ),
    # Search pages #1-#100 and #101-#200, no remote links read. Jira announces no budget
    # on a plain answer: the third is answered 429, and the wait is the Retry-After. JQL
    # asks from the minute: the boundary issue comes again but is dropped before it counts
    # (the checkpoint keeps it by key and ``updated``).
    "jira": Bound(
        2,
        429,
        (30, 30),
        200,
        "since",
        "nextPageToken",
        (("remote_links", False),),
        reread=0,
        held=False,
    ),
    # Relay pages of 100, newest first; the third waits, unsent, until the spent request
    # budget's reset.
    "linear": Bound(2, 400, (30, 30), 150, "since", "after", (("page_size", 100),)),
}
# A GitLab group's listing pages by offset: page 2 asks again from #100's updated_at and
# reads #100 (the seam, skipped) to #199. The third waits, unsent, as a project's.
OFFSET_BOUND = Bound(
    2, 429, (29, 30), 199, "updated_after", "updated_after", (("commit_mentions", False),)
)


def bound_of(side: Side) -> Bound:
    return OFFSET_BOUND if side.offset_pages else BOUNDS[side.tracker.provider]


# What the default rules make of a bulk issue, on each tracker.
STATUS_OF: dict[str, Callable[[Any, int], tuple[str, str]]] = {
    "github": gh.expected_status,
    "gitlab": gl.expected_status,
    "jira": jr.expected_status,
    "linear": lambda fake, n: ("open", "Todo"),
}


@asynccontextmanager
async def rate_limited(
    side: Side, fake: Any, api_url: str, data_dir: Path, reset_in: int, **overrides: Any
) -> AsyncIterator[tuple[HostedEndpoint[Any], VirtualTime[Any]]]:
    """An endpoint over 350 bulk issues, on virtual time, whose tracker lets two listing
    pages through (``BOUNDS``) before its rate limit, the window resetting in ``reset_in``
    seconds. No reserve is left to seats' writes: the sync spends the budget to its end."""
    bound = bound_of(side)
    fake.bulk_issues(side.prefix, 350)
    settings = {**dict(bound.overrides), "rate_reserve": 0, **overrides}
    async with side.open(fake, api_url, data_dir, **settings) as opened:
        clock = opened.virtual_time()
        fake.set_rate_limit(bound.budget, reset_in=reset_in)
        yield opened, clock


async def test_a_rate_limit_within_the_bound_is_waited_out_and_the_page_read_again(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    side, fake = tracker_side, tracker_fake
    bound = bound_of(side)
    async with rate_limited(side, fake, tracker_url, tmp_path / "b", 30) as (endpoint, clock):
        report = await endpoint.poll()

        listing = side.listings(fake)
        if bound.held:
            assert [r.status for r in listing] == [200, 200, 200, 200]
        else:
            assert [r.status for r in listing] == [200, 200, bound.status, 200, 200]
            assert side.page_args(listing[2]) == side.page_args(listing[3])  # not a restart
        assert bound.later in side.page_args(listing[2])
        (wait,) = clock.waits
        assert bound.waited[0] <= wait <= bound.waited[1]
        assert (report.pages, report.issues) == (4, 350)
        assert len(await endpoint.all_tasks()) == 350
        assert "stale" not in await endpoint.client.list_tasks()


# Linear lists the most recently updated first and moves its cursor once a walk is read
# through: its resume is the walk's next page (tests/providers/linear/test_sync.py).
@pytest.mark.parametrize("tracker_side", ["github", "gitlab", "jira"], indirect=True)
async def test_a_rate_limit_beyond_the_bound_fails_the_poll_and_resumes_from_checkpoint(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    side, fake = tracker_side, tracker_fake
    bound = bound_of(side)
    async with rate_limited(
        side, fake, tracker_url, tmp_path / "b", 3600, max_rate_limit_wait_s=60
    ) as (endpoint, clock):
        with pytest.raises(RateLimited):
            await endpoint.poll()

        assert clock.waits == []  # an hour is not slept through
        sent = [200, 200] if bound.held else [200, 200, bound.status]  # held: nothing sent
        assert listing_statuses(side, fake) == sent
        page = await endpoint.client.list_tasks(limit=100)
        assert page["stale"]["reason"].startswith(f"{side.name} sync is failing")
        assert ("held until" if bound.held else str(bound.status)) in page["stale"]["reason"]
        assert page["stale"]["staleAsOf"] == 0  # no sync has succeeded yet
        checkpoint = await endpoint.sync.checkpoint()
        assert checkpoint["cursor"] == side.updated(fake, bound.boundary)
        assert len(await endpoint.all_tasks()) == bound.boundary

        fake.advance(3600)  # the window resets
        mark = len(fake.requests)
        report = await endpoint.poll()

        listing = side.listings(fake, mark)
        since = side.page_args(listing[0])[bound.since]
        assert since == side.since(fake, bound.boundary, back_s=5)
        assert [r.status for r in listing] == [200, 200]
        # The boundary issue is read again (the overlap); none before it is.
        rest = 350 - bound.boundary
        assert (report.issues, report.changed) == (rest + bound.reread, rest)
        tasks = {int(t["taskId"].rsplit("#", 1)[1]): t for t in await endpoint.all_tasks()}
        assert sorted(tasks) == list(range(1, 351))
        status_of = STATUS_OF[side.tracker.provider]
        wrong = [
            n for n, t in tasks.items() if (t["status"], t["statusSource"]) != status_of(fake, n)
        ]
        assert wrong == []
        assert "stale" not in await endpoint.client.list_tasks()


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_are_retried(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path, status: int
) -> None:
    side, fake, api_url = tracker_side, tracker_fake, tracker_url
    fake.bulk_issues(side.prefix, 20)
    async with side.open(fake, api_url, tmp_path / "b") as endpoint:
        clock = endpoint.virtual_time()
        fake.fail_next(2, status=status, path=side.listing[1])

        report = await endpoint.poll()

        assert listing_statuses(side, fake) == [status, status, 200]
        assert len(clock.waits) == 2
        assert clock.waits[0] <= 1.0
        assert clock.waits[1] <= 2.0  # exponential backoff with jitter
        assert report.issues == 20
        assert "stale" not in await endpoint.client.list_tasks()


async def test_server_errors_give_up_after_max_retries(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> None:
    side, fake, api_url = tracker_side, tracker_fake, tracker_url
    fake.bulk_issues(side.prefix, 20)
    async with side.open(fake, api_url, tmp_path / "b", max_retries=2) as endpoint:
        endpoint.virtual_time()
        fake.fail_next(5, status=503, retry_after=None, path=side.listing[1])
        with pytest.raises(TrackerHttpError) as failed:
            await endpoint.poll()
        assert failed.value.status == 503
        assert listing_statuses(side, fake) == [503, 503, 503]
        assert "stale" in await endpoint.client.list_tasks()


@pytest.mark.parametrize(
    ("tracker_side", "case"),
    [(name, case) for name, cases in REFUSALS.items() for case in cases],
    indirect=["tracker_side"],
)
async def test_refusals_are_never_retried(
    tracker_side: Side,
    case: str,
    tracker_fake: Any,
    tracker_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    side, fake, api_url = tracker_side, tracker_fake, tracker_url
    status = int(case.split()[0])
    fake.bulk_issues(side.prefix, 5)
    overrides = REFUSALS[side.tracker.provider][case](fake)
    revoked = REVOKED[side.tracker.provider]
    if status == 401:
        monkeypatch.setenv(side.token_env, revoked)
    caplog.set_level(logging.DEBUG)
    async with side.open(fake, api_url, tmp_path / "b", **overrides) as endpoint:
        clock = endpoint.virtual_time()
        with pytest.raises(TrackerHttpError) as failed:
            await endpoint.poll()
        assert failed.value.status == status
        assert [r.status for r in fake.requests] == [status]
        assert clock.waits == []
        page = await endpoint.client.list_tasks()
        assert page["tasks"] == []
        assert page["stale"]["reason"].startswith(f"{side.name} sync is failing")
    for secret in (fake.token, revoked[: revoked.index("revoked") + len("revoked")]):
        assert secret not in caplog.text
        assert secret not in str(failed.value)
