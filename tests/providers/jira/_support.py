"""Helpers for the Jira provider tests: a Jira endpoint opened the way the bridge opens it
(``open_endpoint``) against the fake Jira on loopback, and readers of its request log."""

from __future__ import annotations

from typing import Any, cast

from cotal_tasks.providers.jira.config import JiraConfig
from tests.conftest import seat
from tests.providers import hosted_support as hosted
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT
from tests.support.fake_tracker import RecordedRequest

ENDPOINT_NAME = "com.acme.jira"
TOKEN_ENV = "COTAL_TASKS_TEST_JIRA_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_JIRA_WEBHOOK_SECRET"
WEBHOOK_SECRET = "a jira webhook secret nobody else knows"
SEARCH = "/rest/api/3/search/jql"

# The seat directory: two Atlassian accounts are seats; every other account is a human.
SEAT_ACCOUNT = "712020:0f7e5a1c-seat-builder"
BUILDER = seat("builder", 1)
REVIEWER_ACCOUNT = "712020:0f7e5a1c-seat-reviewer"
REVIEWER = seat("reviewer", 2)
HUMAN = "557058:human-alice"
SEATS = {SEAT_ACCOUNT: BUILDER.principal, REVIEWER_ACCOUNT: REVIEWER.principal}


def jira_config(api_url: str, **overrides: Any) -> JiraConfig:
    settings = {
        "project": PROJECT,
        "email": "bridge@example.com",
        "token_env": TOKEN_ENV,
        "seats": SEATS,
    }
    return cast(JiraConfig, hosted.tracker_section(JiraConfig, api_url, settings, overrides))


endpoint_config = hosted.endpoint_maker(ENDPOINT_NAME, jira_config)


def task_id(number: int) -> str:
    return f"{PROJECT}#{number}"


class JiraEndpoint(hosted.HostedEndpoint[FakeJira]):
    prefix = PROJECT


open_jira = hosted.endpoint_opener(JiraEndpoint, endpoint_config)


def make_fake() -> FakeJira:
    fake = FakeJira()
    fake.assignable |= {SEAT_ACCOUNT, REVIEWER_ACCOUNT, HUMAN}
    return fake


def searches(fake: FakeJira, since: int = 0) -> list[RecordedRequest]:
    return [r for r in fake.requests[since:] if r.matches("POST", SEARCH)]


jira_mesh = hosted.mesh_opener(hosted.HostedMesh, jira_config)


def expected_status(fake: FakeJira, number: int) -> tuple[str, str]:
    """What the default rules make of a bulk issue (``FakeJira.bulk_issues``): nobody is
    a seat, so an In Progress one is open (the status stays the statusSource)."""
    issue = fake.issue(number)
    if issue.status == "Done":
        return "done", "Done"
    return "open", issue.status
