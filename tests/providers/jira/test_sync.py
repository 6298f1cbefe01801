"""The Jira sync over the wire to the fake Jira: the import by enhanced JQL search and its
``nextPageToken`` pages, the minute granularity of JQL times, the cost of an unchanged
poll, 429s, and deleted and moved issues."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cotal_tasks.providers.hosted.http import TrackerHttpError
from tests.providers.jira._support import SEARCH, JiraEndpoint, open_jira, searches
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT


async def test_import_walks_the_pages_in_order_and_maps_each_issue(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    for k in range(1, 8):
        jira.add_issue(PROJECT, f"Issue {k}", f"Body {k}")
        jira.advance(7)
    jira.page_size_cap = 3
    report = await jr.poll()
    assert report.issues == 7
    pages = searches(jira)
    assert len(pages) == math.ceil(7 / 3)
    first = pages[0].body
    assert first["jql"] == f'project = "{PROJECT}" ORDER BY updated ASC, key ASC'
    assert set(first["fields"]) == {
        "summary",
        "description",
        "status",
        "resolution",
        "labels",
        "assignee",
        "created",
        "updated",
        "security",
        "project",
        "fixVersions",  # the scope's milestone, issue type and horizon
        "issuetype",
        "resolutiondate",
    }
    assert [p.body.get("nextPageToken") is not None for p in pages] == [False, True, True]
    task = await jr.get(3)
    assert (task["title"], task["brief"], task["status"]) == ("Issue 3", "Body 3", "open")
    assert task["statusSource"] == "To Do"
    assert len(await jr.all_tasks()) == 7


def jql_of(request: object) -> str:
    body = getattr(request, "body", None)
    assert isinstance(body, dict)
    return str(body["jql"])


async def test_a_later_poll_asks_from_the_cursor_minute_in_the_users_zone(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    jira.clock.set("2026-03-10T23:59:30Z")  # 10:59 on the 11th in Sydney (UTC+11)
    jira.add_issue(PROJECT, "Issue 1")
    await jr.poll()
    mark = len(jira.requests)
    await jr.poll()
    (search,) = searches(jira, mark)
    # The cursor (23:59:30Z) less the 5 s overlap, to the minute, in the user's zone.
    assert '"2026-03-11 10:59"' in jql_of(search)
    assert jira.calls("GET", "/rest/api/3/myself")  # the zone is read once


async def test_an_unchanged_poll_costs_one_search_request(jira: FakeJira, jr: JiraEndpoint) -> None:
    for k in range(3):
        jira.add_issue(PROJECT, f"Issue {k}")
    await jr.poll()
    await jr.poll()  # reads the user's zone once
    mark = len(jira.requests)
    report = await jr.poll()
    assert [(r.method, r.path) for r in jira.requests[mark:]] == [("POST", SEARCH)]
    assert (report.issues, report.changed) == (0, 0)


async def test_an_issue_edited_in_the_cursors_minute_is_never_skipped(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    jira.clock.set("2026-03-10T10:00:10Z")
    first = jira.add_issue(PROJECT, "Issue 1")
    jira.add_issue(PROJECT, "Issue 2")
    await jr.poll()
    jira.clock.set("2026-03-10T10:00:40Z")  # the same minute as the cursor
    first.summary = "Issue 1, retitled"
    jira.touch(first)
    third = jira.add_issue(PROJECT, "Issue 3")
    report = await jr.poll()
    # Both are read; the unchanged issue 2 of the same minute is deduplicated.
    assert report.issues == 2
    assert (await jr.get(1))["title"] == "Issue 1, retitled"
    assert (await jr.get(third.number))["title"] == "Issue 3"
    again = await jr.poll()
    assert again.issues == 0


async def test_an_edit_during_the_walk_that_shifts_the_pages_loses_no_issue(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    issues = [jira.add_issue(PROJECT, f"Issue {k}") for k in range(1, 8)]
    for issue in issues:
        jira.advance(2)
        jira.touch(issue)
    jira.page_size_cap = 3
    seen: list[int] = []

    def edit_first(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path == SEARCH:
            seen.append(1)
            if len(seen) == 2:  # between page 1 and page 2 of the walk
                jira.advance(2)
                issues[0].summary = "Issue 1, edited during the walk"
                jira.touch(issues[0])

    jira.before_answer = edit_first
    await jr.poll()
    titles = sorted(t["title"] for t in await jr.all_tasks())
    assert len(titles) == 7, titles
    assert "Issue 1, edited during the walk" in titles
    assert "Issue 4" in titles  # the issue the shifted token stepped over


async def test_429_waits_what_retry_after_says(jira: FakeJira, jr: JiraEndpoint) -> None:
    jira.add_issue(PROJECT, "Issue 1")
    clock = jr.virtual_time()
    jira.fail_next(status=429, retry_after=17, path=SEARCH)
    report = await jr.poll()
    assert clock.waits == [17]
    assert report.issues == 1


async def test_429_without_retry_after_waits_for_the_rate_limit_reset(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    jira.clock.set("2026-03-10T10:00:00Z")
    jira.add_issue(PROJECT, "Issue 1")
    clock = jr.virtual_time()
    jira.fail_next(status=429, retry_after=None, path=SEARCH)  # X-RateLimit-Reset: +60 s
    await jr.poll()
    (waited,) = clock.waits
    assert 55 <= waited <= 61


async def test_a_deleted_issue_becomes_dropped_as_deleted(jira: FakeJira, jr: JiraEndpoint) -> None:
    jira.add_issue(PROJECT, "Issue 1")
    await jr.poll()
    jira.delete_issue(1)
    jr.sync.wake({1})
    await jr.poll()
    task = await jr.get(1)
    assert (task["status"], task["statusSource"], task["title"]) == (
        "dropped",
        "deleted",
        "Issue 1",
    )


async def test_a_moved_issue_becomes_dropped_as_moved(jira: FakeJira, jr: JiraEndpoint) -> None:
    jira.add_issue(PROJECT, "Issue 1")
    await jr.poll()
    jira.move_issue(1, "OTHER-9")
    jr.sync.wake({1})
    await jr.poll()
    task = await jr.get(1)
    assert (task["status"], task["statusSource"]) == ("dropped", "moved")


async def test_the_jql_filter_narrows_what_is_mirrored(
    jira: FakeJira, jira_url: str, tmp_path: Path
) -> None:
    jira.add_issue(PROJECT, "Not synced")
    jira.add_issue(PROJECT, "Synced").labels.append("sync")
    async with open_jira(jira, jira_url, tmp_path / "b", jql='labels = "sync"') as ep:
        await ep.poll()
        assert [t["title"] for t in await ep.all_tasks()] == ["Synced"]
    assert '(labels = "sync")' in jql_of(searches(jira)[0])


async def test_a_secured_issue_is_withheld_unless_opted_in(
    jira: FakeJira, jira_url: str, tmp_path: Path
) -> None:
    jira.add_issue(PROJECT, "Payroll leak", "salaries of everyone").security = "Staff only"
    later = jira.add_issue(PROJECT, "Roadmap", "the plan")
    async with open_jira(jira, jira_url, tmp_path / "a") as ep:
        await ep.poll()
        assert [t["title"] for t in await ep.all_tasks()] == ["Roadmap"]
        assert not jira.calls("GET", "/rest/api/3/issue/DEMO-1/remotelink")
        later.security = "Staff only"  # a mirrored issue given a security level
        jira.advance(61)
        jira.touch(later)
        await ep.poll()
        task = await ep.get(later.number)
        assert (task["title"], task.get("brief")) == ("(restricted issue)", None)
        assert (task["status"], task["statusSource"]) == ("dropped", "confidential")
    async with open_jira(jira, jira_url, tmp_path / "b", include_secured=True) as ep:
        await ep.poll()
        assert (await ep.get(1))["title"] == "Payroll leak"


async def test_remote_links_of_a_changed_issue_become_its_evidence(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    issue = jira.add_issue(PROJECT, "Issue 1")
    issue.remote_links = [
        {"id": 1, "object": {"url": "https://github.com/acme/app/pull/12", "title": "PR"}},
        {
            "id": 2,
            "object": {"url": "https://gitlab.com/acme/ops/-/commit/0a1b2c3d4e", "title": "c"},
        },
        {"id": 3, "object": {"url": "https://github.com/acme/app/actions/runs/77", "title": "CI"}},
        {"id": 4, "object": {"url": "https://wiki.example.com/page", "title": "a page"}},
    ]
    await jr.poll()
    task = await jr.get(1)
    assert sorted((e["kind"], e["ref"]) for e in task["evidence"]) == [
        ("commit", "acme/ops@0a1b2c3d4e"),
        ("review", "https://github.com/acme/app/pull/12"),
        ("run", "https://github.com/acme/app/actions/runs/77"),
    ]
    mark = len(jira.requests)
    await jr.poll()
    await jr.poll()
    assert not jira.calls("GET", "*/remotelink")[
        1:
    ]  # an unchanged issue's links are not read again
    assert len(jira.requests[mark:]) == 3  # the user's zone once, then a search a poll


async def test_the_reconcile_sweep_finds_a_deleted_issue_on_its_cadence(
    jira: FakeJira, jr: JiraEndpoint
) -> None:
    jr.sync_on_tracker_time()
    for k in range(1, 5):
        jira.add_issue(PROJECT, f"Issue {k}")
        jira.advance(61)
    jira.set_status(jira.issue(4), "Done", "Done")
    await jr.poll()  # the import starts the sweep's clock
    await jr.poll()  # reads the user's zone
    jira.delete_issue(2)
    jira.advance(600)
    report = await jr.poll()
    assert not report.reconciled
    assert (await jr.get(2))["status"] == "open"
    jira.advance(3600)
    mark = len(jira.requests)
    report = await jr.poll()
    sweep = [(r.method, r.path, r.status) for r in jira.requests[mark + 1 :]]
    assert sweep == [
        ("POST", SEARCH, 200),  # the issues not Done: 1 and 3 (4 is done, 2 is gone)
        ("GET", "/rest/api/3/issue/DEMO-2", 404),  # the one unfinished task not listed
        ("GET", "/rest/api/3/project/DEMO", 200),  # the project reads: 2 was deleted
    ]
    listing = jira.requests[mark + 1].body
    assert "statusCategory != Done" in listing["jql"]
    assert listing["fields"] == ["status"]
    assert (report.reconciled, report.sweep_requests, report.swept) == (True, 1, 1)
    gone = await jr.get(2)
    assert (gone["status"], gone["statusSource"]) == ("dropped", "deleted")


async def test_a_bearer_token_is_sent_as_bearer(
    jira: FakeJira, jira_url: str, tmp_path: Path
) -> None:
    jira.add_issue(PROJECT, "Issue 1")
    async with open_jira(jira, jira_url, tmp_path / "b", auth="bearer", email=None) as ep:
        await ep.poll()
        assert len(await ep.all_tasks()) == 1
    assert {r.headers["authorization"] for r in jira.requests} == {f"Bearer {jira.token}"}


def test_near_limit_is_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    import httpx

    from cotal_tasks.providers.jira.client import JiraRetry

    policy = JiraRetry()
    near = httpx.Response(200, headers={"X-RateLimit-NearLimit": "true"})
    for now in (1000.0, 1030.0, 1061.0):
        assert policy(near, 1, now) is None
    assert caplog.text.count("nearly spent") == 2


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
