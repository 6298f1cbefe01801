"""Two-way on GitHub: a person's edit and a seat's write to the same issue, interleaved.

Each case says who wins by the conflict rule in ``docs/github.md`` and checks it on
GitHub (the fake) and in the mirror within one poll, with no lost update, no duplicate
write and no write loop; on an endpoint over one repository, and over two (the issues in
the first, each repository its own source).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import ErrorCode
from tests.bridge._support import DictPresence
from tests.providers.github._support import (
    BUILDER,
    HUMAN,
    ISSUES,
    REPO,
    GitHubEndpoint,
    open_github,
    task_id,
)
from tests.providers.github.writeback_support import claimed_by_builder, synced
from tests.providers.twoway.harness import (
    HOOKS,
    WHEN,
    answer,
    assert_no_write_loop,
    during_write,
    tracker_writes,
    write_beside_edit,
)
from tests.support.fake_github import FakeGitHub

Json = dict[str, Any]
SOURCES = {"repository": None, "repositories": [REPO, "octo-org/gadgets"]}


@pytest.fixture(params=["one repository", "two repositories"])
async def gh(
    request: pytest.FixtureRequest,
    fake: FakeGitHub,
    github_url: str,
    tmp_path: Path,
    presence: DictPresence,
) -> AsyncIterator[GitHubEndpoint]:
    """The GitHub endpoint, over its repository alone or beside a second one."""
    several = request.param == "two repositories"
    if several:
        fake.add_repo("octo-org/gadgets")
    overrides = SOURCES if several else {}
    async with open_github(
        fake, github_url, tmp_path / "bridge", presence=presence, **overrides
    ) as opened:
        yield opened


class GitHubSide:
    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def write_path(self, number: int) -> str:
        return f"{ISSUES}/{number}*"

    def read_path(self, number: int) -> str:
        return f"{ISSUES}/{number}"


def rename(fake: FakeGitHub, number: int, title: str) -> None:
    fake.set_title(fake.issue(REPO, number), title, HUMAN)


@pytest.mark.parametrize("landed", [False, True], ids=["before-it-lands", "after-it-lands"])
async def test_a_title_edited_while_a_write_is_in_flight_reaches_the_mirror(
    gh: GitHubEndpoint, landed: bool
) -> None:
    """Finding 1: the poll in the write's window used to skip the issue as the bridge's
    echo and keep the page's ETag; the write then committed the old title, and every
    later poll was a 304."""
    await claimed_by_builder(gh)
    await gh.poll()
    mark = len(gh.fake.requests)

    reply = await during_write(
        gh,
        GitHubSide(gh.fake),
        1,
        gh.client.update(BUILDER, task_id(1), status="blocked", note="Waiting on CI."),
        lambda: rename(gh.fake, 1, "Ship the parser, v2"),
        landed=landed,
    )

    assert reply.error is None, reply.error
    gh.fake.advance(5)
    await gh.poll()  # within one poll
    record = await gh.get(1)
    assert record["title"] == "Ship the parser, v2"  # the person's edit, never lost
    assert record["status"] == "blocked"  # the seat's write, never dropped
    assert gh.fake.issue(REPO, 1).title == "Ship the parser, v2"
    writes = tracker_writes(gh.fake, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    await assert_no_write_loop(gh, gh.fake)
    assert (await gh.get(1))["title"] == "Ship the parser, v2"


async def test_a_write_never_commits_its_older_record_over_the_syncs_newer_one(
    gh: GitHubEndpoint,
) -> None:
    """Finding 4: a person renames the issue after the write's own read of it; the sync
    (whose ledger check came before the write began) mirrors the rename; the write then
    committed its older record over it, and the mirror said the old title until a later
    poll read the rename again."""
    await claimed_by_builder(gh)
    await gh.poll()
    held = gh.fake.hold_next(method="POST", path="*/graphql", after_a_write=True)
    running = asyncio.ensure_future(
        gh.client.update(BUILDER, task_id(1), status="blocked", note="Waiting on CI.")
    )
    await asyncio.wait_for(held.arrived.wait(), 10)  # the write read the issue back
    gh.fake.advance(1)
    rename(gh.fake, 1, "Ship the parser, renamed")
    snapshot = await gh.tracker.fetch(1)
    assert snapshot is not None
    await gh.hosted.mirroring.upsert(snapshot)  # the sync's commit, checked before the write began
    assert (await gh.get(1))["title"] == "Ship the parser, renamed"
    held.release()

    reply = await asyncio.wait_for(running, 10)

    assert reply["title"] == "Ship the parser, renamed"  # the reply says what GitHub holds
    record = await gh.get(1)
    assert (record["title"], record["status"]) == ("Ship the parser, renamed", "blocked")


async def test_a_claim_of_an_issue_a_person_just_closed_answers_conflict(
    gh: GitHubEndpoint,
) -> None:
    """Finding 2: the claim answered ``claimed`` with ``statusSource: closed/not_planned``
    and left the closed issue with the seat assigned and ``in-progress`` added."""
    await synced(gh, "Ship the parser")
    mark = len(gh.fake.requests)
    gh.fake.advance(1)
    gh.fake.close_issue(REPO, 1, "not_planned", by=HUMAN)  # before the poll sees it

    reply = await answer(gh.client.claim(BUILDER, task_id(1)))

    assert reply.error is not None
    assert reply.error.code is ErrorCode.CONFLICT
    assert reply.outcome == "not-executed"
    assert "get-task" in reply.error.message  # the remedy
    issue = gh.fake.issue(REPO, 1)
    assert (issue.state, issue.assignees, issue.labels) == ("closed", [], [])
    assert tracker_writes(gh.fake, mark) == []
    record = await gh.get(1)  # the mirror shows what the person did, at once
    assert (record["status"], record["statusSource"]) == ("dropped", "closed/not_planned")
    assert "binding" not in record
    await assert_no_write_loop(gh, gh.fake)


# -- the matrix: where the person's edit lands, and what the webhooks do ------------------
#
# A seat blocks issue 1 (claimed by it) while a person renames the issue. The rule: the
# title is the person's, the status the seat's; both stand, on GitHub and in the mirror,
# within one poll, with one write of each kind and no write over three idle polls.


@pytest.mark.parametrize("hooks", HOOKS)
@pytest.mark.parametrize("when", WHEN)
async def test_a_rename_and_a_seats_write_both_stand(
    gh: GitHubEndpoint, when: str, hooks: str
) -> None:
    await claimed_by_builder(gh)
    await gh.poll()
    mark = len(gh.fake.requests)
    side = GitHubSide(gh.fake)
    write = gh.client.update(BUILDER, task_id(1), status="blocked", note="Waiting on CI.")

    def edit() -> None:
        rename(gh.fake, 1, "Ship the parser, v2")

    reply = await write_beside_edit(gh, side, 1, write, edit, when=when, hooks=hooks)

    assert reply.error is None, reply.error  # a true outcome: the write took effect
    assert reply.record is not None
    assert reply.record["status"] == "blocked"
    gh.fake.advance(5)
    await gh.poll()  # within one poll
    record = await gh.get(1)
    assert (record["title"], record["status"]) == ("Ship the parser, v2", "blocked")
    issue = gh.fake.issue(REPO, 1)
    assert (issue.title, issue.labels) == ("Ship the parser, v2", ["blocked"])
    writes = tracker_writes(gh.fake, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    assert len([c for c in issue.comments if "Waiting on CI." in (c.body or "")]) == 1
    await assert_no_write_loop(gh, gh.fake)


@pytest.mark.parametrize("when", WHEN)
async def test_a_person_closing_while_a_seat_blocks_is_never_undone(
    gh: GitHubEndpoint, when: str
) -> None:
    """The status is written by both: a close a person made first wins (``conflict``,
    nothing written); one that lands while the write is on its way stands, the write
    takes back its own label and answers ``conflict`` (``executed``); one after it
    stands. The bridge never reopens."""
    await claimed_by_builder(gh)
    await gh.poll()
    mark = len(gh.fake.requests)
    write = gh.client.update(BUILDER, task_id(1), status="blocked")

    def edit() -> None:
        gh.fake.close_issue(REPO, 1, "not_planned", by=HUMAN)

    reply = await write_beside_edit(
        gh, GitHubSide(gh.fake), 1, write, edit, when=when, hooks="absent"
    )
    if when == "before":
        assert reply.error is not None
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "not-executed")
        assert tracker_writes(gh.fake, mark) == []
    elif when.startswith("during"):
        # Finding 2: the write takes back its own label; the seat hears what happened.
        assert reply.error is not None, reply.record
        assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "executed")
        assert "blocked" not in gh.fake.issue(REPO, 1).labels
    else:  # the write answered before the person's close
        assert reply.record is not None, reply.error
        assert reply.record["status"] == "blocked"
    gh.fake.advance(5)
    await gh.poll()
    record = await gh.get(1)
    assert (record["status"], record["statusSource"]) == ("dropped", "closed/not_planned")
    assert gh.fake.issue(REPO, 1).state == "closed"  # never reopened
    writes = tracker_writes(gh.fake, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    await assert_no_write_loop(gh, gh.fake)


async def test_a_claim_while_a_person_closes_leaves_no_seat_on_the_closed_issue(
    gh: GitHubEndpoint,
) -> None:
    """Finding 2, in the write's window: the close lands after the bridge's read and
    before its writes. The claim used to leave the closed issue with the seat assigned
    and ``in-progress`` added, and answered ``claimed``."""
    await synced(gh, "Ship the parser")
    reply = await during_write(
        gh,
        GitHubSide(gh.fake),
        1,
        gh.client.claim(BUILDER, task_id(1)),
        lambda: gh.fake.close_issue(REPO, 1, "not_planned", by=HUMAN),
    )

    assert reply.error is not None, reply.record
    assert (reply.error.code, reply.outcome) == (ErrorCode.CONFLICT, "executed")
    issue = gh.fake.issue(REPO, 1)
    assert (issue.state, issue.assignees, issue.labels) == ("closed", [], [])
    record = await gh.get(1)
    assert (record["status"], record["statusSource"]) == ("dropped", "closed/not_planned")
    assert "binding" not in record
    await assert_no_write_loop(gh, gh.fake)
