"""The shared two-way machinery (``providers/hosted``) on GitLab: a person's edit in the
window of a seat's write reaches the mirror within one poll, and a write over a person's
close answers ``conflict`` (the rule in ``docs/gitlab.md``, "Two-way: who wins").

The harness is ``tests.providers.twoway.harness``; GitLab's own interleavings (its
assignee list, its notes) are in the GitLab two-way suite.
"""

from __future__ import annotations

import pytest

from cotal_tasks.core import ErrorCode
from tests.providers.gitlab._support import BUILDER, ISSUES, PROJECT, GitLabEndpoint, task_id
from tests.providers.twoway.harness import (
    answer,
    assert_no_write_loop,
    during_write,
    tracker_writes,
)
from tests.support.fake_gitlab import FakeGitLab


class GitLabSide:
    def __init__(self, fake: FakeGitLab) -> None:
        self.fake = fake

    def write_path(self, iid: int) -> str:
        return f"{ISSUES}/{iid}*"

    def read_path(self, iid: int) -> str:
        return f"{ISSUES}/{iid}"


def rename(fake: FakeGitLab, iid: int, title: str) -> None:
    issue = fake.issue(PROJECT, iid)
    issue.title = title
    issue.updated_ms = fake.clock.ms


async def one_issue(gl: GitLabEndpoint) -> int:
    gl.fake.advance(60)
    iid = int(gl.fake.add_issue(PROJECT, "Ship the parser")["iid"])
    await gl.poll()
    await gl.poll()
    return iid


@pytest.mark.parametrize("landed", [False, True], ids=["before-it-lands", "after-it-lands"])
async def test_a_title_edited_while_a_claim_is_in_flight_reaches_the_mirror(
    gl: GitLabEndpoint, landed: bool
) -> None:
    iid = await one_issue(gl)
    mark = len(gl.fake.requests)

    reply = await during_write(
        gl,
        GitLabSide(gl.fake),
        iid,
        gl.client.claim(BUILDER, task_id(iid)),
        lambda: rename(gl.fake, iid, "Ship the parser, v2"),
        landed=landed,
    )

    assert reply.error is None, reply.error
    gl.fake.advance(5)
    await gl.poll()  # within one poll
    record = await gl.get(iid)
    assert (record["title"], record["status"]) == ("Ship the parser, v2", "claimed")
    writes = tracker_writes(gl.fake, mark)
    assert len(writes) == len(set(writes)), f"a duplicate write: {writes}"
    await assert_no_write_loop(gl, gl.fake)


async def test_a_claim_of_an_issue_a_person_just_closed_answers_conflict(
    gl: GitLabEndpoint,
) -> None:
    iid = await one_issue(gl)
    mark = len(gl.fake.requests)
    gl.fake.advance(1)
    gl.fake.close_issue(PROJECT, iid)

    reply = await answer(gl.client.claim(BUILDER, task_id(iid)))

    assert reply.error is not None
    assert reply.error.code is ErrorCode.CONFLICT
    assert reply.outcome == "not-executed"
    issue = gl.fake.issue(PROJECT, iid)
    assert (issue.state, issue.assignees, issue.labels) == ("closed", [], [])
    assert tracker_writes(gl.fake, mark) == []
    assert (await gl.get(iid))["status"] == "done"
    await assert_no_write_loop(gl, gl.fake)
