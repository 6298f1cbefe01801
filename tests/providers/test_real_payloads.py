"""The mapping, webhook and pagination code on recorded shapes: GitHub's published OpenAPI
examples and webhook examples (octokit), and the examples of GitLab's documentation. The
fixtures and their licences are in ``tests/fixtures/*/README.md``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx

from cotal_tasks.core import Task
from cotal_tasks.providers.github import evidence as github_evidence
from cotal_tasks.providers.github import mapping as github
from cotal_tasks.providers.github import webhook as github_hook
from cotal_tasks.providers.github.client import GONE, GitHubClient, github_http_client
from cotal_tasks.providers.github.client import github_retry as retry
from cotal_tasks.providers.github.config import github_default_rules
from cotal_tasks.providers.github.tracker import _last_page
from cotal_tasks.providers.gitlab import mapping as gitlab
from cotal_tasks.providers.gitlab import webhook as gitlab_hook
from cotal_tasks.providers.gitlab.client import GitLabClient, gitlab_http_client, gitlab_retry
from cotal_tasks.providers.gitlab.config import gitlab_default_rules
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError
from cotal_tasks.providers.hosted.mapping import project
from cotal_tasks.providers.hosted.tracker import TrackedIssue

FIXTURES = Path(__file__).parent.parent / "fixtures"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def to_task(issue: TrackedIssue, *, lab: bool = False) -> tuple[Task, ItemBoundary]:
    boundary = ItemBoundary("test")
    task = project(
        issue,
        space="demo",
        rules=gitlab_default_rules() if lab else github_default_rules(),
        seats={},
        existing=None,
        uid_of=lambda owner, actor: None,
        now=1_700_000_000_000,
        note=lambda reason, detail: boundary.note(reason, issue.task_id, detail),
    )
    return task, boundary


# -- GitHub --------------------------------------------------------------------------------


def test_github_an_issue_from_a_webhook_maps_to_a_task() -> None:
    payload = load("github/webhook-issues-opened.json")
    repo, rid = github_hook.source(payload)
    assert (repo, rid) == ("Codertocat/Hello-World", 186853002)
    assert github_hook.issues_named("issues", payload, repo or "") == {1}
    issue = payload["issue"]
    assert not github.is_pull_request(issue)

    task, boundary = to_task(github.tracked("Codertocat/Hello-World", issue))

    assert task.taskId == "Codertocat/Hello-World#1"
    assert task.title == issue["title"]
    assert (task.status, task.statusSource) == ("open", "open")
    assert 0 < task.createdAt <= task.updatedAt
    assert boundary.total() == 0


def test_github_a_pull_request_in_the_issues_api_is_not_a_task() -> None:
    item = load("github/openapi-issue.json")  # the documented example is a pull request
    assert github.is_pull_request(item)
    legacy = copy.deepcopy(item)
    legacy["pull_request"] = {"html_url": None, "diff_url": None, "patch_url": None}
    assert not github.is_pull_request(legacy)  # an issue from before 2013
    task, _ = to_task(github.tracked("octocat/Hello-World", legacy))
    assert task.taskId == "octocat/Hello-World#1347"


def _as_graphql_pull(pull: dict[str, Any], head: str) -> dict[str, Any]:
    """A recorded pull request's fields as the GraphQL timeline shows them."""
    return {
        "__typename": "PullRequest",
        "number": pull["number"],
        "url": pull["html_url"],
        "headRefName": pull["head"]["ref"],
        "headRepository": {"nameWithOwner": head},
        "repository": {"nameWithOwner": pull["base"]["repo"]["full_name"]},
    }


def test_github_evidence_from_recorded_events_and_pull_requests() -> None:
    repo = "octocat/Hello-World"
    # REST timeline events are not GraphQL nodes: read as nothing, never raised.
    for name in ("openapi-timeline-issue-events.json", "openapi-issue-event-items.json"):
        assert github_evidence.timeline_evidence(repo, load(f"github/{name}")) == []
    (closed,) = load("github/openapi-issue-event-items.json")
    pull = load("github/openapi-pull-request.json")
    nodes = [
        {
            "__typename": "ClosedEvent",
            "createdAt": closed["created_at"],
            "closer": {"__typename": "Commit", "oid": closed["commit_id"]},
        },
        {"__typename": "CrossReferencedEvent", "source": _as_graphql_pull(pull, repo)},
        {"__typename": "ConnectedEvent", "subject": _as_graphql_pull(pull, "someone/fork")},
    ]
    found = github_evidence.timeline_evidence(repo, nodes)
    assert [(e.kind, e.ref) for e in found] == [
        ("commit", "6dcb09b5b57875f334f61aebed695e2e4193db5e"),
        ("review", "https://github.com/octocat/Hello-World/pull/1347"),
        ("branch", "new-topic"),
        ("review", "https://github.com/octocat/Hello-World/pull/1347"),
        ("branch", "someone/fork:new-topic"),  # a fork's branch names its repository
    ]
    opened = load("github/webhook-pull-request-opened.json")
    assert github_hook.issues_named("pull_request", opened, "Codertocat/Hello-World") == set()


def test_a_delivery_naming_more_than_it_refreshes_is_read_no_further() -> None:
    """A delivery naming more issues than ``webhook_max_issues`` wakes one poll, so its
    text is read only until that many and one more are found: a pull request or merge
    request mentioning thousands costs the listener what one naming 21 costs. Before,
    every mention was read (most of what a flood's delivery cost the event loop)."""
    opened = copy.deepcopy(load("github/webhook-pull-request-opened.json"))
    opened["pull_request"]["body"] = " ".join(f"#{n}" for n in range(10, 5010))
    repo = "Codertocat/Hello-World"
    assert github_hook.issues_named("pull_request", opened, repo, 20) == set(range(10, 31))
    assert len(github_hook.issues_named("pull_request", opened, repo)) == 5000  # unbounded
    (mr,) = load("gitlab/doc-related-merge-requests.json")
    mr = {**mr, "title": "Many", "description": " ".join(f"#{n}" for n in range(1, 100))}
    hook = {"object_kind": "merge_request", "object_attributes": mr}
    assert gitlab_hook.issues_named(hook, "twitter/flight", 20) == set(range(1, 22))


def test_github_a_transfer_delivery_wakes_the_issue() -> None:
    payload = load("github/webhook-issues-transferred.json")
    assert github_hook.issues_named("issues", payload, "octo-org/octo-repo") == {1}


def test_github_an_organisations_ping_has_no_repository() -> None:
    ping = load("github/webhook-ping-organization.json")
    assert github_hook.source(ping) == (None, None)
    assert ping["hook"]["type"] == "Organization"


def test_github_documented_answers_for_one_issue_are_all_handled() -> None:
    answers = load("github/openapi-link-and-answers.json")["get_issue_answers"]
    assert set(GONE) <= {int(code) for code in answers}  # 301 transferred, 410 deleted


async def test_github_the_documented_link_header_is_followed_on_the_same_origin() -> None:
    link = load("github/openapi-link-and-answers.json")["link"]
    sent: list[httpx.Request] = []

    since = "2026-11-30T06:43:14Z"
    # A first page of one timestamp: the walk steps through it by the link it was given.
    tied = [{"number": n, "updated_at": since} for n in (1, 2)]

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        first = len(sent) == 1
        return httpx.Response(
            200, json=tied if first else [], headers={"link": link} if first else {}
        )

    client = github_http_client("https://api.github.com", "ghp_test", 5)
    client._transport = httpx.MockTransport(answer)
    pages = GitHubClient(TrackerHttp(client, retry), "o/r")
    try:
        responses = [response async for response in pages.issue_pages(since, None)]
    finally:
        await client.aclose()

    assert str(sent[1].url) == "https://api.github.com/resource?page=2"
    assert sent[1].headers["authorization"] == "Bearer ghp_test"
    assert _last_page(responses[0]) == 5


# -- GitLab --------------------------------------------------------------------------------


def test_gitlab_documented_issues_map_and_duplicates_drop() -> None:
    (item,) = load("gitlab/doc-issues-list.json")
    path = gitlab.path_of(item)
    assert path == "my-group/my-project"

    task, boundary = to_task(gitlab.tracked(path, item), lab=True)
    assert task.taskId == "my-group/my-project#6"
    assert (task.status, task.statusSource) == ("open", "opened")  # open, whatever its link
    assert boundary.total() == 0

    closed = {**item, "state": "closed"}
    dropped, _ = to_task(gitlab.tracked(path, closed), lab=True)
    assert (dropped.status, dropped.statusSource) == ("dropped", "closed/duplicate")
    moved = {**closed, "_links": {}, "moved_to_id": 77}
    gone, _ = to_task(gitlab.tracked(path, moved), lab=True)
    assert (gone.status, gone.statusSource) == ("dropped", "moved")
    secret = {**item, "confidential": True}
    withheld = gitlab.tracked(path, secret)
    assert (withheld.title, withheld.body, withheld.gone) == (
        "(confidential issue)",
        None,
        "confidential",
    )
    assert gitlab.tracked(path, secret, include_confidential=True).title == item["title"]


def test_gitlab_documented_related_merge_request_is_evidence() -> None:
    (mr,) = load("gitlab/doc-related-merge-requests.json")
    found = gitlab.merge_request_evidence(mr, closed_it=False, own_path="twitter/flight")
    assert [(e.kind, e.ref) for e in found] == [
        ("review", "https://gitlab.example.com/twitter/flight/merge_requests/4"),
        ("branch", "so_long_jquery"),
        ("run", "https://gitlab.example.com/twitter/flight/pipelines/38980952"),
    ]
    assert gitlab.mentioned_issues("twitter/flight", mr) == {8}


def test_gitlab_documented_issue_hook_and_its_work_item_form() -> None:
    hook = load("gitlab/doc-issue-hook.json")
    assert gitlab_hook.project_of(hook) == ("gitlabhq/gitlab-test", 1)
    assert gitlab_hook.issues_named(hook, "gitlabhq/gitlab-test") == {23}
    task_hook = copy.deepcopy(hook)
    task_hook["object_kind"] = task_hook["event_type"] = "work_item"
    task_hook["object_attributes"]["type"] = "Task"
    assert gitlab_hook.issues_named(task_hook, "gitlabhq/gitlab-test") == {23}


async def keyset_walk(api_url: str) -> tuple[list[httpx.Request], Exception | None]:
    """Walk a listing whose first page answers with the documented keyset ``Link``."""
    link = load("gitlab/doc-keyset-link.json")["link"]
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=[], headers={"link": link} if len(sent) == 1 else {})

    client = gitlab_http_client(api_url, "glpat-test", 5)
    client._transport = httpx.MockTransport(answer)
    pages = GitLabClient(TrackerHttp(client, gitlab_retry), "acme/widgets")
    failure: Exception | None = None
    try:
        async for _ in pages.issue_pages(None):
            pass
    except TrackerHttpError as exc:
        failure = exc
    finally:
        await client.aclose()
    return sent, failure


async def test_gitlab_the_documented_keyset_link_is_followed_on_the_same_origin() -> None:
    sent, failure = await keyset_walk("https://gitlab.example.com/api/v4")
    assert failure is None
    assert sent[1].url.params["id_after"] == "42"
    assert sent[1].headers["private-token"] == "glpat-test"

    # Configured with another origin, the same link is refused before the token is sent.
    sent, failure = await keyset_walk("http://gitlab.internal:8080/api/v4")
    assert [r.url.host for r in sent] == ["gitlab.internal"]
    assert isinstance(failure, TrackerHttpError)
    assert "https://gitlab.example.com" in failure.message
