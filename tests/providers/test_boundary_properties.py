"""Arbitrary JSON into every mapping entry point of both trackers (issue mapping, evidence
mapping, webhook parsing): nothing escapes the boundary. An item with an issue number
always becomes a valid task record, whatever its other fields hold; an item without one
is recorded as unmappable, never raised."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cotal_tasks.core import Task
from cotal_tasks.providers.github import evidence
from cotal_tasks.providers.github import mapping as github
from cotal_tasks.providers.github import webhook as github_hook
from cotal_tasks.providers.github.client import GitHubClient, github_http_client, github_retry
from cotal_tasks.providers.github.config import GitHubConfig, github_default_rules
from cotal_tasks.providers.github.tracker import GitHubTracker
from cotal_tasks.providers.gitlab import mapping as gitlab
from cotal_tasks.providers.gitlab import webhook as gitlab_hook
from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.config import GitLabConfig, gitlab_default_rules
from cotal_tasks.providers.gitlab.tracker import GitLabTracker
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.hosted.mapping import project
from cotal_tasks.providers.hosted.tracker import Evidence, TrackedIssue

REPO = "octo-org/hello-world"
PROJECT = "acme/platform/backend"

# Text with what trackers really send: lone surrogates, control characters, credential
# shapes, over-long values.
TEXT = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.sampled_from(["fix/token=refresh", "Bearer abc", "a\x00b", "é" * 3000, "#12 and !3"]),
)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
STAMP = st.one_of(JSON, st.sampled_from(["2026-11-30T06:43:14Z", "0001-01-01T00:00:00Z", "x"]))


def fields(**known: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Issue-shaped items: the given keys (optional), each with any JSON value."""
    return st.fixed_dictionaries({}, optional=dict(known))


# What an issue carries on either tracker (its number aside), any field any JSON.
NUMBER = st.one_of(st.integers(min_value=-5, max_value=10**20), JSON)
ISSUE_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "title": st.one_of(TEXT, JSON),
    "state": JSON,
    "labels": JSON,
    "assignees": JSON,
    "created_at": STAMP,
    "updated_at": STAMP,
}
GITHUB_ISSUE = fields(
    number=NUMBER, body=st.one_of(TEXT, JSON), state_reason=JSON, pull_request=JSON, **ISSUE_FIELDS
)
GITLAB_ISSUE = fields(
    iid=NUMBER,
    description=st.one_of(TEXT, JSON),
    confidential=JSON,
    moved_to_id=JSON,
    _links=JSON,
    references=JSON,
    project_id=JSON,
    **ISSUE_FIELDS,
)
PULL = fields(
    __typename=st.one_of(st.just("PullRequest"), JSON),
    number=JSON,
    url=st.one_of(TEXT, JSON),
    headRefName=st.one_of(TEXT, JSON),
    headRepository=st.one_of(fields(nameWithOwner=st.one_of(st.just(REPO), TEXT, JSON)), JSON),
    headRepositoryOwner=JSON,
    repository=JSON,
    mergeCommit=st.one_of(fields(oid=st.one_of(TEXT, JSON)), JSON),
)
# A node of an issue's GraphQL timeline (the evidence reader's input), any field any JSON.
EVENT = fields(
    __typename=st.one_of(
        st.sampled_from(
            ["CrossReferencedEvent", "ConnectedEvent", "ReferencedEvent", "ClosedEvent"]
        ),
        JSON,
    ),
    createdAt=STAMP,
    source=st.one_of(PULL, JSON),
    subject=st.one_of(PULL, JSON),
    closer=st.one_of(PULL, fields(__typename=st.just("Commit"), oid=TEXT), JSON),
    commit=st.one_of(fields(oid=st.one_of(TEXT, JSON)), JSON),
    commitRepository=JSON,
)
MERGE_REQUEST = fields(
    iid=JSON,
    web_url=st.one_of(TEXT, JSON),
    source_branch=st.one_of(TEXT, JSON),
    head_pipeline=JSON,
    merge_commit_sha=JSON,
    updated_at=STAMP,
    merged_at=STAMP,
    title=TEXT,
    description=st.one_of(TEXT, JSON),
)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def to_task(issue: TrackedIssue, gitlab_rules: bool = False) -> Task:
    boundary = ItemBoundary("test")
    return project(
        issue,
        space="demo",
        rules=gitlab_default_rules() if gitlab_rules else github_default_rules(),
        seats={"octobot": "local.builder"},
        existing=None,
        uid_of=lambda owner, actor: "uid-1",
        now=1_700_000_000_000,
        note=lambda reason, detail: boundary.note(reason, issue.task_id, detail),
    )


def through(step: Any, *args: Any) -> tuple[Any, ItemBoundary]:
    boundary = ItemBoundary("test")
    return boundary.map("item", step, *args), boundary


@SETTINGS
@given(item=st.one_of(GITHUB_ISSUE, JSON), events=st.lists(st.one_of(EVENT, JSON), max_size=6))
def test_github_issue_and_evidence_mapping(item: Any, events: list[Any]) -> None:
    # The timeline as one GraphQL answer, with the issue's node and a pull request's.
    answer = {
        "repository": {
            "a0": {"number": 1, "timelineItems": {"nodes": events, "pageInfo": {}}},
            "a1": item,
        }
    }
    batch = [evidence.Ask(1), evidence.Ask(2, pull=True)]
    read = evidence.Found()
    boundary = ItemBoundary("test")
    evidence.read(REPO, batch, answer, read, boundary.note)
    found = read.evidence.get(1, [])
    assert all(isinstance(e, Evidence) and isinstance(e.ref, str) and e.ref for e in found)
    assert all(isinstance(n, int) for n in read.linked.get(2, set()))

    issue, boundary = through(github.tracked, REPO, item, found)
    if issue is None:
        assert boundary.counts == {"item-unmappable": 1}  # recorded, not raised
        return
    assert isinstance(to_task(issue), Task)  # always a valid record, fields degraded
    github.is_pull_request(item if isinstance(item, dict) else {})


@SETTINGS
@given(item=st.one_of(GITLAB_ISSUE, JSON), mrs=st.lists(st.one_of(MERGE_REQUEST, JSON)))
def test_gitlab_issue_and_evidence_mapping(item: Any, mrs: list[Any]) -> None:
    found = [
        e for mr in mrs for e in gitlab.merge_request_evidence(mr, closed_it=True, own_path=PROJECT)
    ]
    assert all(isinstance(e, Evidence) for e in found)
    for mr in mrs:
        gitlab.mentioned_issues(PROJECT, mr if isinstance(mr, dict) else {})
    issue, boundary = through(gitlab.tracked, PROJECT, item, found)
    if issue is None:
        assert boundary.counts == {"item-unmappable": 1}
        return
    assert isinstance(to_task(issue, gitlab_rules=True), Task)
    if isinstance(item, dict):
        gitlab.path_of(item)


HOOK = fields(
    object_kind=st.one_of(st.sampled_from(["issue", "work_item", "note", "merge_request"]), JSON),
    object_attributes=st.one_of(MERGE_REQUEST, JSON),
    issue=st.one_of(GITHUB_ISSUE, JSON),
    pull_request=st.one_of(MERGE_REQUEST, JSON),
    repository=JSON,
    project=JSON,
    project_id=JSON,
)


@SETTINGS
@given(
    payload=st.one_of(HOOK, st.dictionaries(st.text(max_size=8), JSON)),
    event=st.sampled_from(["issues", "issue_comment", "pull_request", "ping", "push"]),
)
def test_webhook_parsing(payload: dict[str, Any], event: str) -> None:
    named = github_hook.issues_named(event, payload, REPO)
    assert all(isinstance(n, int) for n in named)
    repository, rid = github_hook.source(payload)
    assert repository is None or isinstance(repository, str)
    assert rid is None or isinstance(rid, int)
    assert all(isinstance(n, int) for n in gitlab_hook.issues_named(payload, PROJECT))
    path, pid = gitlab_hook.project_of(payload)
    assert path is None or isinstance(path, str)
    assert pid is None or isinstance(pid, int)


PAGE = st.one_of(st.lists(st.one_of(GITHUB_ISSUE, GITLAB_ISSUE, JSON), max_size=6), JSON)


async def walk(tracker: Any) -> list[TrackedIssue]:
    found: list[TrackedIssue] = []
    async for page in tracker.list_changed(None, {}):
        found += page.issues
    return found


def served(body: Any) -> httpx.MockTransport:
    """Every request answers ``body`` (one page: no ``Link``, no next page), encoded as a
    tracker does: ASCII JSON, a lone surrogate as its ``\\ud83d`` escape."""
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return httpx.MockTransport(
        lambda request: httpx.Response(200, content=content, headers=headers)
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=PAGE)
# A lone surrogate in an item of the cursor's second (its digest is kept for the next poll).
@example(body=[{"number": 0, "state_reason": "\ud800"}])
def test_a_listing_page_of_anything_yields_only_mapped_issues(body: Any) -> None:
    """Both trackers' listings, fed any JSON page: each item is mapped or counted, and the
    walk itself never raises."""

    async def both() -> None:
        hub_http = github_http_client("https://api.github.com", "t", 5)
        hub_http._transport = served(body)
        lab_http = gitlab_http_client("https://gitlab.example.com/api/v4", "t", 5)
        lab_http._transport = served(body)
        hub = GitHubTracker(
            GitHubClient(TrackerHttp(hub_http, github_retry), REPO),
            GitHubConfig(repository=REPO),
            ItemBoundary("GitHub"),
        )
        lab = GitLabTracker(
            GitLabClient(TrackerHttp(lab_http, gitlab_retry), PROJECT, "keyset"),
            GitLabConfig(project=PROJECT),
            ItemBoundary("GitLab"),
        )
        try:
            for tracker in (hub, lab):
                issues = await walk(tracker)
                assert all(isinstance(issue, TrackedIssue) for issue in issues)
                for issue in issues:
                    assert isinstance(to_task(issue, gitlab_rules=tracker is lab), Task)
        finally:
            await hub_http.aclose()
            await lab_http.aclose()

    asyncio.run(both())
