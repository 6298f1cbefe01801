"""The fake GitHub taking writes, signing webhooks, and logging every request."""

from __future__ import annotations

import hmac
import json

import httpx

from tests.providers.github.fake._support import ISSUES, REPO
from tests.support import fake_github_webhooks as hooks
from tests.support.fake_github import FakeGitHub

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
    assert (
        hooks.sign(hooks.TEST_VECTOR_SECRET, hooks.TEST_VECTOR_PAYLOAD)
        == hooks.TEST_VECTOR_SIGNATURE
    )
    body, headers = hooks.signed_webhook(
        hooks.TEST_VECTOR_SECRET, "ping", hooks.TEST_VECTOR_PAYLOAD
    )
    assert body == hooks.TEST_VECTOR_PAYLOAD
    assert headers["X-Hub-Signature-256"] == hooks.TEST_VECTOR_SIGNATURE


def test_webhook_payloads(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, "hook me", labels=["bug"], user="monalisa")
    fake.add_pull(REPO, "fix", head_ref="fix", closes=[1])
    comment = fake.add_comment(REPO, 1, "+1")
    body, headers = hooks.signed_webhook(
        "s3cret", "issues", hooks.issues_payload(fake, "opened", REPO, 1)
    )
    assert hmac.compare_digest(headers["X-Hub-Signature-256"], hooks.sign("s3cret", body))
    assert headers["X-GitHub-Event"] == "issues"
    assert headers["Content-Type"] == "application/json"
    assert len(headers["X-GitHub-Delivery"]) == 36
    payload = json.loads(body)
    assert payload["action"] == "opened"
    assert payload["sender"]["login"] == "monalisa"
    assert payload["repository"]["full_name"] == REPO
    assert payload["repository"]["owner"]["login"] == "octo-org"
    labeled = hooks.issues_payload(fake, "labeled", REPO, 1, label="bug")
    assert labeled["label"]["name"] == "bug"
    fake.close_issue(REPO, 1, "not_planned", by="octocat")
    closed = hooks.issues_payload(fake, "closed", REPO, 1)
    assert closed["issue"]["state_reason"] == "not_planned"
    assert closed["sender"]["login"] == "octocat"
    assigned = hooks.issues_payload(fake, "assigned", REPO, 1, assignee="octocat")
    assert assigned["assignee"]["login"] == "octocat"
    edited = hooks.issues_payload(fake, "edited", REPO, 1, changes={"title": {"from": "old"}})
    assert edited["changes"] == {"title": {"from": "old"}}
    created = hooks.issue_comment_payload(fake, REPO, 1, comment["id"])
    assert (created["action"], created["comment"]["body"]) == ("created", "+1")
    opened = hooks.pull_request_payload(fake, "opened", REPO, 2)
    assert opened["pull_request"]["body"] == "Fixes #1"
    assert opened["number"] == 2
    fake.merge_pull(REPO, 2)
    merged = hooks.pull_request_payload(fake, "closed", REPO, 2)
    assert merged["pull_request"]["merged"] is True
    assert hooks.ping_payload(fake, REPO)["hook"]["type"] == "Repository"


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
