"""The hosted cases for Jira, as the shared suites run them for GitHub and GitLab: faults
in the middle of an import resume from the checkpoint, server errors are retried and then
given up, a refusal is never retried and never shows the token, and a person's edit in
Jira is mirrored, never undone by a write of the bridge."""

from __future__ import annotations

import logging

import pytest

from cotal_tasks.providers.hosted.http import TrackerHttpError
from tests.bridge._support import DictPresence
from tests.providers.jira._support import BUILDER, HUMAN, SEARCH, JiraEndpoint, searches, task_id
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
