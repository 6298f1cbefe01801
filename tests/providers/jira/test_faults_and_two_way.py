"""The hosted cases for Jira, as the shared suites run them for GitHub and GitLab: faults
in the middle of an import resume from the checkpoint, server errors are retried and then
given up, a refusal is never retried and never shows the token, and a person's edit in
Jira is mirrored, never undone by a write of the bridge."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttpError
from tests.bridge._support import DictPresence
from tests.providers.jira._support import (
    BUILDER,
    HUMAN,
    SEARCH,
    JiraEndpoint,
    open_jira,
    searches,
    task_id,
)
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT


def changes(jira: FakeJira) -> int:
    """The bridge's writes so far (a search is a POST, but reads)."""
    return len([r for r in jira.writes if r.path != SEARCH])


def many(jira: FakeJira, count: int) -> None:
    for k in range(1, count + 1):
        jira.add_issue(PROJECT, f"Issue {k}")
        jira.advance(61)


async def test_a_fault_mid_import_resumes_from_the_checkpoint(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    many(jira, 7)
    jira.page_size_cap = 3
    jr.virtual_time()
    count: list[int] = []

    def fail_page_two(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path == SEARCH:
            count.append(1)
            if len(count) == 2:
                jira.fail_next(6, status=503, retry_after=None, path=SEARCH)

    jira.before_answer = fail_page_two
    with pytest.raises(TrackerHttpError, match="503"):
        await jr.poll()
    assert len(await jr.all_tasks()) == 3  # page one, checkpointed
    jira.before_answer = None
    mark = len(jira.requests)
    report = await jr.poll()
    assert len(await jr.all_tasks()) == 7
    assert report.issues == 4  # the rest; page one is not read again as news
    assert "updated >= " in str(searches(jira, mark)[0].body["jql"])


async def test_a_server_error_is_retried_with_backoff(jira: FakeJira, jr: JiraEndpoint) -> None:
    many(jira, 2)
    clock = jr.virtual_time()
    jira.fail_next(2, status=502, retry_after=None, path=SEARCH)
    report = await jr.poll()
    assert report.issues == 2
    assert len(clock.waits) == 2
    assert [r.status for r in searches(jira)] == [502, 502, 200]


async def test_a_refusal_is_never_retried_and_never_shows_the_token(
    jira: FakeJira, jr: JiraEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    many(jira, 2)
    await jr.poll()
    token = jira.token
    jira.token = "ATATT3x-rotated"  # the bridge's token is revoked
    caplog.set_level(logging.DEBUG)
    mark = len(jira.requests)
    with pytest.raises(TrackerHttpError, match="401") as caught:
        await jr.poll()
    assert len(jira.requests[mark:]) == 1
    assert token not in str(caught.value)
    assert token not in caplog.text
    assert jr.store.health.failing is not None
    assert len(await jr.all_tasks()) == 2  # the board stays, marked stale


async def claimed(jira: FakeJira, jr: JiraEndpoint, presence: DictPresence) -> None:
    """One issue, mirrored and claimed by ``BUILDER``, then a minute later in Jira."""
    presence.put(BUILDER, environment=None)
    many(jira, 1)
    await jr.poll()
    await jr.client.claim(BUILDER, task_id(1))
    jira.advance(61)


async def test_a_person_reassigning_in_jira_unbinds_and_is_not_undone(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    await claimed(jira, jr, presence)
    issue = jira.issue(1)
    issue.assignee = HUMAN  # a person takes it over in Jira
    jira.touch(issue)
    writes = changes(jira)
    await jr.poll()
    task = await jr.get(1)
    assert (task["status"], task.get("binding")) == ("open", None)
    assert task["statusSource"] == "In Progress"
    assert changes(jira) == writes  # the bridge wrote nothing back
    assert issue.assignee == HUMAN


async def test_a_person_closing_in_jira_is_mirrored(
    jira: FakeJira, jr: JiraEndpoint, presence: DictPresence
) -> None:
    await claimed(jira, jr, presence)
    jira.set_status(jira.issue(1), "Done", "Duplicate")
    writes = changes(jira)
    await jr.poll()
    task = await jr.get(1)
    assert (task["status"], task["statusSource"]) == ("dropped", "Done/Duplicate")
    assert changes(jira) == writes


async def test_a_404_while_the_project_does_not_read_changes_nothing(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    many(jira, 2)
    await jr.poll()
    kept = await jr.get(2)
    jira.fail_next(status=404, path="/rest/api/3/issue/DEMO-2")
    jira.fail_next(status=404, path="/rest/api/3/project/DEMO")
    assert await jr.sync.refresh([2]) == (0, 0)
    assert await jr.get(2) == kept
    assert jr.store.degradations()["counts"] == {"issue-unreadable": 1}
    assert await jr.sync.refresh([77]) == (1, 0)  # deleted before it was mirrored: no task


async def test_a_rate_limit_beyond_the_bound_fails_the_poll_and_resumes(
    jira: FakeJira, jira_url: str, tmp_path: Path
) -> None:
    many(jira, 7)
    jira.page_size_cap = 3
    async with open_jira(jira, jira_url, tmp_path / "b", max_rate_limit_wait_s=60) as jr:
        clock = jr.virtual_time()
        count: list[int] = []

        def limit_page_two(method: str, path: str, query: dict[str, str]) -> None:
            if method == "POST" and path == SEARCH:
                count.append(1)
                if len(count) == 2:
                    jira.fail_next(status=429, retry_after=3600, path=SEARCH)

        jira.before_answer = limit_page_two
        with pytest.raises(RateLimited):
            await jr.poll()
        assert clock.waits == []  # an hour is not slept through
        page = await jr.client.list_tasks(limit=100)
        assert page["stale"]["reason"].startswith("Jira sync is failing")
        assert len(page["tasks"]) == 3
        jira.before_answer = None
        jira.advance(3600)
        await jr.poll()
        assert len(await jr.all_tasks()) == 7
        assert "stale" not in await jr.client.list_tasks()
