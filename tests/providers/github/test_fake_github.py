"""The fake GitHub itself: pagination, filters, conditional requests, rate limits, writes,
timelines, webhooks signing and the request log."""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.fake_github import (
    TEST_VECTOR_PAYLOAD,
    TEST_VECTOR_SECRET,
    TEST_VECTOR_SIGNATURE,
    FakeClock,
    FakeGitHub,
    issue_comment_payload,
    issues_payload,
    ping_payload,
    pull_request_payload,
    serve_fake_github,
    sign,
    signed_webhook,
)

REPO = "octo-org/hello-world"
ISSUES = f"/repos/{REPO}/issues"
START = "2026-03-01T12:00:00Z"


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(clock=FakeClock(START), assignable=["octocat"])


@pytest.fixture
async def client(fake: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    async with fake.client() as client:
        yield client


def numbers(response: httpx.Response) -> list[int]:
    return [item["number"] for item in response.json()]


# -- listing ---------------------------------------------------------------------------


async def test_pagination_follows_link_over_loopback(fake: FakeGitHub) -> None:
    fake.bulk_issues(REPO, 250)
    async with (
        serve_fake_github(fake) as base_url,
        httpx.AsyncClient(base_url=base_url, headers=fake.auth_headers()) as client,
    ):
        assert base_url.startswith("http://127.0.0.1:")
        response = await client.get(ISSUES, params={"per_page": 100, "direction": "asc"})
        assert set(response.links) == {"next", "last"}
        assert response.links["next"]["url"].startswith(base_url + ISSUES)
        assert "per_page=100" in response.links["next"]["url"]
        assert "page=3" in response.links["last"]["url"]
        assert response.json()[0]["url"] == f"{base_url}{ISSUES}/1"  # absolute, own base
        seen, pages = numbers(response), 1
        while "next" in response.links:
            response = await client.get(response.links["next"]["url"])
            seen += numbers(response)
            pages += 1
        assert pages == 3
        assert len(response.json()) == 50
        assert set(response.links) == {"prev", "first"}
        assert seen == list(range(1, 251))
    assert len(fake.calls("GET", ISSUES)) == 3
    assert [c.query.get("page") for c in fake.calls("GET", ISSUES)] == [None, "2", "3"]


async def test_page_size_defaults_to_30_and_caps_at_100(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.bulk_issues(REPO, 120)
    assert len((await client.get(ISSUES)).json()) == 30
    capped = await client.get(ISSUES, params={"per_page": 500})
    assert len(capped.json()) == 100
    assert "page=2" in capped.links["last"]["url"]
    middle = await client.get(ISSUES, params={"per_page": 30, "page": 2})
    assert set(middle.links) == {"prev", "next", "last", "first"}
    single = await client.get(ISSUES, params={"labels": "no-such-label"})
    assert single.json() == []
    assert "link" not in single.headers


async def test_state_defaults_to_open_and_includes_pull_requests(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.add_issue(REPO, "open one")
    fake.add_issue(REPO, "done", state="closed")
    fake.add_issue(REPO, "dropped", state="closed", state_reason="not_planned")
    fake.add_pull(REPO, "fix", head_ref="fix-1", closes=[1])
    default = await client.get(ISSUES)
    assert sorted(numbers(default)) == [1, 4]
    pr = next(i for i in default.json() if i["number"] == 4)
    assert pr["pull_request"]["url"].endswith("/pulls/4")
    assert pr["draft"] is False
    assert "pull_request" not in next(i for i in default.json() if i["number"] == 1)
    closed = (await client.get(ISSUES, params={"state": "closed"})).json()
    assert {(i["number"], i["state_reason"]) for i in closed} == {
        (2, "completed"),
        (3, "not_planned"),
    }
    assert all(i["closed_at"] == START for i in closed)
    assert len((await client.get(ISSUES, params={"state": "all"})).json()) == 4
    bad = await client.get(ISSUES, params={"state": "bogus"})
    assert bad.status_code == 422
    assert bad.json()["message"] == "Validation Failed"


async def test_since_is_inclusive_and_sorts_by_updated(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.add_issue(REPO, "old", updated_at="2026-03-01T10:00:00Z")
    fake.add_issue(REPO, "edge", updated_at="2026-03-01T11:00:00Z")
    fake.add_issue(REPO, "new", updated_at="2026-03-01T11:30:00Z")
    fake.add_issue(REPO, "closed", state="closed", updated_at="2026-03-01T11:45:00Z")
    params = {"since": "2026-03-01T11:00:00Z", "sort": "updated", "direction": "asc"}
    assert numbers(await client.get(ISSUES, params=params)) == [2, 3]
    assert numbers(await client.get(ISSUES, params=params | {"state": "all"})) == [2, 3, 4]
    fake.advance(5)
    assert fake.touch(REPO, 1) == "2026-03-01T12:00:05Z"
    assert numbers(await client.get(ISSUES, params=params)) == [2, 3, 1]
    bad = await client.get(ISSUES, params={"since": "yesterday"})
    assert bad.status_code == 422
    assert bad.json()["errors"] == [
        {"resource": "Issue", "field": "since", "code": "invalid", "value": "yesterday"}
    ]


async def test_since_lag_hides_fresh_updates(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.add_issue(REPO, "fresh")
    fake.since_lag = 10
    since = {"since": "2026-03-01T00:00:00Z"}
    assert numbers(await client.get(ISSUES, params=since)) == []
    assert numbers(await client.get(ISSUES)) == [1]  # only ``since`` queries lag
    fake.advance(10)
    assert numbers(await client.get(ISSUES, params=since)) == [1]


# -- conditional requests and limits ----------------------------------------------------


async def test_repeated_etag_gets_304_without_spending_budget(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.bulk_issues(REPO, 5)
    first = await client.get(ISSUES)
    etag = first.headers["etag"]
    assert etag.startswith('W/"')
    again = await client.get(ISSUES, headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    assert again.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"]
    other_url = await client.get(ISSUES, params={"per_page": 2}, headers={"If-None-Match": etag})
    assert other_url.status_code == 200
    fake.advance()
    fake.touch(REPO, 3)
    changed = await client.get(ISSUES, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != etag
    assert len(fake.calls(status=304)) == 1


async def test_primary_limit_403_with_reset_then_refill(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.set_rate_limit(2, reset_in=600)
    reset = str(fake.clock.seconds + 600)
    ok = await client.get(ISSUES)
    assert ok.headers["x-ratelimit-remaining"] == "1"
    assert ok.headers["x-ratelimit-limit"] == "5000"
    assert ok.headers["x-ratelimit-resource"] == "core"
    etag = ok.headers["etag"]
    assert (await client.get(ISSUES, headers={"If-None-Match": etag})).status_code == 304
    assert (await client.get(f"{ISSUES}/999")).headers["x-ratelimit-remaining"] == "0"
    limited = await client.get(ISSUES)
    assert limited.status_code == 403
    assert limited.json()["message"].startswith("API rate limit exceeded for user ID")
    assert limited.headers["x-ratelimit-remaining"] == "0"
    assert limited.headers["x-ratelimit-reset"] == reset
    assert "retry-after" not in limited.headers
    status = await client.get("/rate_limit")  # free, and answers even when exhausted
    assert status.json()["resources"]["core"]["remaining"] == 0
    fake.advance(600)
    refilled = await client.get(ISSUES)
    assert refilled.status_code == 200
    assert refilled.headers["x-ratelimit-remaining"] == "4999"


async def test_scripted_secondary_limits_and_server_errors(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.add_issue(REPO, "one")
    fake.fail_next(2, status=429, retry_after=2)
    for _ in range(2):
        throttled = await client.get(ISSUES)
        assert throttled.status_code == 429
        assert throttled.headers["retry-after"] == "2"
        assert throttled.headers["x-ratelimit-remaining"] == "5000"  # not the primary limit
        assert "secondary rate limit" in throttled.json()["message"]
    assert (await client.get(ISSUES)).status_code == 200
    fake.fail_next(status=403, retry_after=1, message="You have exceeded a secondary rate limit")
    secondary = await client.get(ISSUES)
    assert (secondary.status_code, secondary.headers["retry-after"]) == (403, "1")
    assert secondary.json()["message"] == "You have exceeded a secondary rate limit"
    fake.fail_next(status=502, path="*/timeline")
    assert (await client.get(ISSUES)).status_code == 200  # the failure waits for its path
    bad_gateway = await client.get(f"{ISSUES}/1/timeline")
    assert bad_gateway.status_code == 502
    assert bad_gateway.headers["content-type"].startswith("text/html")
    assert (await client.get(f"{ISSUES}/1/timeline")).status_code == 200


async def test_authentication(fake: FakeGitHub) -> None:
    transport = httpx.ASGITransport(app=fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gh") as anonymous:
        assert (await anonymous.get(ISSUES)).status_code == 401
        wrong = await anonymous.get(ISSUES, headers={"Authorization": "Bearer nope"})
        assert (wrong.status_code, wrong.json()["message"]) == (401, "Bad credentials")
        legacy = await anonymous.get(ISSUES, headers={"Authorization": f"token {fake.token}"})
        assert legacy.status_code == 200
        assert legacy.headers["x-ratelimit-remaining"] == "4999"  # 401s cost nothing


async def test_unknown_deleted_and_transferred(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    moving = fake.add_issue(REPO, "moving")
    fake.add_issue(REPO, "going")
    assert (await client.get("/repos/octo-org/nope/issues")).json()["message"] == "Not Found"
    assert (await client.get(f"{ISSUES}/99")).status_code == 404
    fake.delete_issue(REPO, 2)
    assert (await client.get(f"{ISSUES}/2")).status_code == 410
    new_number = fake.transfer_issue(REPO, 1, "octo-org/elsewhere")
    moved = await client.get(f"{ISSUES}/1")
    assert moved.status_code == 301
    assert moved.headers["location"].endswith(f"/repos/octo-org/elsewhere/issues/{new_number}")
    assert numbers(await client.get(ISSUES, params={"state": "all"})) == []
    there = (await client.get(moved.headers["location"])).json()
    assert (there["number"], there["id"], there["node_id"]) == (
        new_number,
        moving["id"],
        moving["node_id"],
    )


# -- writes ------------------------------------------------------------------------------


async def test_bad_writes_get_422(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.add_issue(REPO, "target")
    bad_state = await client.patch(f"{ISSUES}/1", json={"state": "bogus"})
    assert bad_state.status_code == 422
    body = bad_state.json()
    assert body["message"] == "Validation Failed"
    assert body["errors"] == [
        {"resource": "Issue", "field": "state", "code": "invalid", "value": "bogus"}
    ]
    assert body["documentation_url"].startswith("https://docs.github.com/")
    no_title = await client.post(ISSUES, json={"body": "x"})
    assert no_title.json()["errors"][0]["code"] == "missing_field"
    stranger = await client.post(ISSUES, json={"title": "t", "assignees": ["stranger"]})
    assert stranger.status_code == 422
    assert stranger.json()["errors"][0]["value"] == "stranger"
    not_json = await client.post(ISSUES, content=b"{", headers={"content-type": "text/plain"})
    assert not_json.status_code == 400
    fake.refuse_writes(403)
    refused = await client.post(f"{ISSUES}/1/comments", json={"body": "hi"})
    assert refused.status_code == 403
    fake.refuse_writes(422, "Repository is locked")
    assert (await client.patch(f"{ISSUES}/1", json={"state": "closed"})).status_code == 422
    fake.allow_writes()
    assert fake.issue(REPO, 1).state == "open"
    assert not fake.issue(REPO, 1).comments


async def test_writes_follow_github_semantics(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    created = await client.post(
        ISSUES, json={"title": "New", "body": "b", "labels": ["bug"], "assignees": ["octocat"]}
    )
    assert created.status_code == 201
    assert created.headers["location"] == created.json()["url"]
    assert created.json()["user"]["login"] == "cotal-bot"
    url = f"{ISSUES}/1"
    fake.advance(3)
    ignored = await client.patch(url, json={"state": "open", "state_reason": "not_planned"})
    assert ignored.json()["state_reason"] is None  # state did not change
    assert ignored.json()["updated_at"] == "2026-03-01T12:00:03Z"
    closed = (await client.patch(url, json={"state": "closed"})).json()
    assert (closed["state"], closed["state_reason"]) == ("closed", "completed")
    assert closed["closed_by"]["login"] == "cotal-bot"
    same = await client.patch(url, json={"state": "closed", "state_reason": "not_planned"})
    assert same.json()["state_reason"] == "completed"
    reopened = (await client.patch(url, json={"state": "open"})).json()
    assert (reopened["state_reason"], reopened["closed_at"]) == ("reopened", None)
    dropped = await client.patch(url, json={"state": "closed", "state_reason": "not_planned"})
    assert dropped.json()["state_reason"] == "not_planned"

    assert (await client.get(f"/repos/{REPO}/assignees/octocat")).status_code == 204
    assert (await client.get(f"/repos/{REPO}/assignees/stranger")).status_code == 404
    added = await client.post(f"{url}/assignees", json={"assignees": ["cotal-bot", "stranger"]})
    assert added.status_code == 201
    assert [a["login"] for a in added.json()["assignees"]] == ["octocat", "cotal-bot"]
    removed = await client.request("DELETE", f"{url}/assignees", json={"assignees": ["octocat"]})
    assert [a["login"] for a in removed.json()["assignees"]] == ["cotal-bot"]

    labels = await client.post(f"{url}/labels", json={"labels": ["workflow::blocked"]})
    assert [x["name"] for x in labels.json()] == ["bug", "workflow::blocked"]
    assert (await client.delete(f"{url}/labels/bug")).json()[0]["name"] == "workflow::blocked"
    assert (await client.delete(f"{url}/labels/bug")).status_code == 404

    fake.advance(2)
    comment = await client.post(f"{url}/comments", json={"body": "On it."})
    assert comment.status_code == 201
    assert comment.json()["body"] == "On it."
    issue = (await client.get(url)).json()
    assert issue["comments"] == 1
    assert issue["updated_at"] == "2026-03-01T12:00:05Z"
    listed = (await client.get(f"{url}/comments")).json()
    assert [c["id"] for c in listed] == [comment.json()["id"]]


async def test_timeline_events(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.add_issue(REPO, "bug", updated_at="2026-03-01T11:00:00Z")
    fake.add_commit_reference(REPO, 1, "a" * 40)
    fake.add_pull(REPO, "Fix the bug", head_ref="fix-bug", head_sha="b" * 40, closes=[1])
    fake.connect(REPO, 1, 2)
    assert fake.issue(REPO, 1).updated_at < fake.clock.seconds  # linking does not bump it
    events = (await client.get(f"{ISSUES}/1/timeline")).json()
    assert [e["event"] for e in events] == ["referenced", "cross-referenced", "connected"]
    assert events[0]["commit_id"] == "a" * 40
    assert events[0]["commit_url"].endswith(f"/repos/{REPO}/commits/{'a' * 40}")
    source = events[1]["source"]
    assert source["type"] == "issue"
    assert source["issue"]["number"] == 2
    assert "pull_request" in source["issue"]
    assert source["issue"]["body"] == "Fixes #1"
    assert source["issue"]["repository"]["full_name"] == REPO
    assert set(events[2]) >= {"id", "node_id", "actor", "event", "created_at"}
    pull = (await client.get(f"/repos/{REPO}/pulls/2")).json()
    assert (pull["head"]["ref"], pull["head"]["sha"]) == ("fix-bug", "b" * 40)
    fake.advance()
    sha = fake.merge_pull(REPO, 2)
    closed = (await client.get(f"{ISSUES}/1/timeline", params={"per_page": 2, "page": 2})).json()
    assert [e["event"] for e in closed] == ["connected", "closed"]
    assert closed[1]["commit_id"] == sha
    assert closed[1]["state_reason"] == "completed"
    merged = (await client.get(f"{ISSUES}/2")).json()
    assert merged["pull_request"]["merged_at"] is not None
    assert (merged["state"], merged["state_reason"]) == ("closed", None)


# -- webhooks ----------------------------------------------------------------------------


def test_signature_reproduces_githubs_test_vector() -> None:
    assert sign(TEST_VECTOR_SECRET, TEST_VECTOR_PAYLOAD) == TEST_VECTOR_SIGNATURE
    body, headers = signed_webhook(TEST_VECTOR_SECRET, "ping", TEST_VECTOR_PAYLOAD)
    assert body == TEST_VECTOR_PAYLOAD
    assert headers["X-Hub-Signature-256"] == TEST_VECTOR_SIGNATURE


def test_webhook_payloads(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, "hook me", labels=["bug"], user="monalisa")
    fake.add_pull(REPO, "fix", head_ref="fix", closes=[1])
    comment = fake.add_comment(REPO, 1, "+1")
    body, headers = signed_webhook("s3cret", "issues", issues_payload(fake, "opened", REPO, 1))
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], sign("s3cret", body))
    assert headers["X-GitHub-Event"] == "issues"
    assert headers["Content-Type"] == "application/json"
    assert len(headers["X-GitHub-Delivery"]) == 36
    payload = json.loads(body)
    assert payload["action"] == "opened"
    assert payload["sender"]["login"] == "monalisa"
    assert payload["repository"]["full_name"] == REPO
    assert payload["repository"]["owner"]["login"] == "octo-org"
    labeled = issues_payload(fake, "labeled", REPO, 1, label="bug")
    assert labeled["label"]["name"] == "bug"
    fake.close_issue(REPO, 1, "not_planned", by="octocat")
    closed = issues_payload(fake, "closed", REPO, 1)
    assert closed["issue"]["state_reason"] == "not_planned"
    assert closed["sender"]["login"] == "octocat"
    assigned = issues_payload(fake, "assigned", REPO, 1, assignee="octocat")
    assert assigned["assignee"]["login"] == "octocat"
    edited = issues_payload(fake, "edited", REPO, 1, changes={"title": {"from": "old"}})
    assert edited["changes"] == {"title": {"from": "old"}}
    created = issue_comment_payload(fake, REPO, 1, comment["id"])
    assert (created["action"], created["comment"]["body"]) == ("created", "+1")
    opened = pull_request_payload(fake, "opened", REPO, 2)
    assert opened["pull_request"]["body"] == "Fixes #1"
    assert opened["number"] == 2
    fake.merge_pull(REPO, 2)
    merged = pull_request_payload(fake, "closed", REPO, 2)
    assert merged["pull_request"]["merged"] is True
    assert ping_payload(fake, REPO)["hook"]["type"] == "Repository"


# -- the request log ---------------------------------------------------------------------


async def test_request_log(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.bulk_issues(REPO, 3)
    first = await client.get(ISSUES, params={"state": "all"})
    await client.get(
        ISSUES, params={"state": "all"}, headers={"If-None-Match": first.headers["etag"]}
    )
    await client.get(f"{ISSUES}/1/timeline")
    await client.patch(f"{ISSUES}/1", json={"title": "Renamed"})
    log = fake.requests
    assert [(r.method, r.status) for r in log] == [
        ("GET", 200),
        ("GET", 304),
        ("GET", 200),
        ("PATCH", 200),
    ]
    assert log[0].query == {"state": "all"}
    assert log[1].if_none_match == first.headers["etag"]
    assert log[0].headers["authorization"] == f"Bearer {fake.token}"
    assert len(fake.calls("GET", "*/timeline")) == 1
    fake.fail_next(status=500)
    await client.post(f"{ISSUES}/1/comments", json={"body": "lost"})
    assert [(w.body, w.status) for w in fake.writes] == [
        ({"title": "Renamed"}, 200),
        ({"body": "lost"}, 500),
    ]
    assert not fake.issue(REPO, 1).comments
    renamed = (await client.get(f"{ISSUES}/1/timeline")).json()[-1]
    assert renamed["event"] == "renamed"
    assert renamed["rename"]["to"] == "Renamed"
