"""The fake GitLab under load and writes: rate limits, scripted faults, authentication,
refused writes, write semantics, merge-request links, webhooks and the request log."""

from __future__ import annotations

import json

import httpx

from tests.providers.gitlab.fake._support import ENCODED, ISSUES, PROJECT, START
from tests.support.fake_gitlab import (
    DEFAULT_WEBHOOK_UUID,
    FakeClock,
    FakeGitLab,
    gitlab_webhook,
    issue_hook_payload,
    merge_request_hook_payload,
    note_hook_payload,
    parse_iso,
)

# -- rate limits and faults --------------------------------------------------------------


async def test_budget_exhaustion_gives_429_with_retry_after(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.set_rate_limit(1, limit=600, reset_in=30)
    ok = await client.get(ISSUES)
    assert ok.headers["ratelimit-limit"] == "600"
    assert ok.headers["ratelimit-remaining"] == "0"
    assert ok.headers["ratelimit-observed"] == "600"
    reset = int(ok.headers["ratelimit-reset"])
    assert reset == int(parse_iso(START) / 1000) + 30
    assert ok.headers["ratelimit-resettime"] == "Mon, 30 Nov 2026 06:43:44 GMT"
    throttled = await client.get(ISSUES)
    assert throttled.status_code == 429
    assert throttled.text == "Retry later\n"
    assert throttled.headers["retry-after"] == "30"
    assert throttled.headers["ratelimit-name"] == "throttle_authenticated_api"
    fake.advance(30)
    assert (await client.get(ISSUES)).headers["ratelimit-remaining"] == "599"


async def test_scripted_failures(fake: FakeGitLab, client: httpx.AsyncClient) -> None:
    fake.fail_next(2, status=429, retry_after=3)
    fake.fail_next(status=502)
    fake.fail_next(status=500, path="*/issues/1")
    for _ in range(2):
        r = await client.get(ISSUES)
        assert (r.status_code, r.headers["retry-after"]) == (429, "3")
    gateway = await client.get(ISSUES)
    assert gateway.status_code == 502
    assert gateway.headers["content-type"].startswith("text/html")
    assert (await client.get(ISSUES)).status_code == 200
    fake.add_issue(PROJECT)
    server = await client.get(f"{ISSUES}/1")
    assert (server.status_code, server.json()) == (500, {"message": "500 Internal Server Error"})
    assert (await client.get(f"{ISSUES}/1")).status_code == 200
    fake.fail_next(status=429, retry_after=None)
    assert "retry-after" not in (await client.get(ISSUES)).headers


async def test_rate_limit_headers_can_be_missing(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    assert "ratelimit-remaining" in (await client.get(ISSUES)).headers
    fake.omit_rate_limit_headers()
    response = await client.get(ISSUES)
    assert response.status_code == 200
    assert not [h for h in response.headers if h.startswith("ratelimit-")]
    fake.set_rate_limit(0)
    throttled = await client.get(ISSUES)
    assert throttled.status_code == 429
    assert not [h for h in throttled.headers if h.startswith("ratelimit-")]
    assert "retry-after" in throttled.headers


async def test_authentication(fake: FakeGitLab) -> None:
    transport = httpx.ASGITransport(app=fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x/api/v4") as anon:
        r = await anon.get(ISSUES)
        assert (r.status_code, r.json()) == (401, {"message": "401 Unauthorized"})
        wrong = await anon.get(ISSUES, headers={"PRIVATE-TOKEN": "glpat-wrong"})
        assert wrong.status_code == 401
        bearer = await anon.get(ISSUES, headers=fake.auth_headers(bearer=True))
        assert bearer.status_code == 200
    assert [c.status for c in fake.requests] == [401, 401, 200]


# -- writes ------------------------------------------------------------------------------


async def test_refused_write_is_403_and_changes_nothing(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.add_issue(PROJECT, "keep me")
    fake.refuse_writes()
    before = fake.issue_json(PROJECT, 1)
    refused = await client.put(f"{ISSUES}/1", json={"state_event": "close"})
    assert (refused.status_code, refused.json()) == (403, {"message": "403 Forbidden"})
    assert (await client.post(f"{ISSUES}/1/notes", json={"body": "x"})).status_code == 403
    assert fake.issue_json(PROJECT, 1) == before
    assert (await client.get(f"{ISSUES}/1")).status_code == 200
    fake.refuse_writes(422, "Spam detected")
    assert (await client.post(ISSUES, json={"title": "t"})).json() == {"message": "Spam detected"}
    fake.allow_writes()
    assert (await client.put(f"{ISSUES}/1", json={"state_event": "close"})).status_code == 200


async def test_writes_follow_gitlab_semantics(fake: FakeGitLab, client: httpx.AsyncClient) -> None:
    dana = fake.add_user("dana", "Dana Scully")
    users = (await client.get("/users", params={"username": "dana"})).json()
    assert [(u["id"], u["name"]) for u in users] == [(dana.id, "Dana Scully")]
    assert (await client.get("/users", params={"username": "nobody"})).json() == []
    created = await client.post(
        ISSUES,
        json={"title": "New", "description": "d", "labels": "bug,workflow::todo",
              "assignee_ids": [dana.id]},
    )  # fmt: skip
    assert created.status_code == 201
    issue = created.json()
    assert (issue["iid"], issue["labels"], issue["author"]["username"]) == (
        1, ["bug", "workflow::todo"], "cotal-bot",
    )  # fmt: skip
    assert issue["created_at"] == issue["updated_at"] == START
    fake.advance(1)
    moved = await client.put(
        f"{ISSUES}/1", json={"add_labels": "workflow::in progress", "remove_labels": "bug"}
    )
    assert moved.json()["labels"] == ["workflow::in progress"]  # scoped: exclusive
    assert moved.json()["updated_at"] == "2026-11-30T06:43:15.123Z"
    fake.advance(1)
    closed = (await client.put(f"{ISSUES}/1", json={"state_event": "close"})).json()
    assert (closed["state"], closed["closed_by"]["username"]) == ("closed", "cotal-bot")
    assert closed["closed_at"] == closed["updated_at"] == "2026-11-30T06:43:16.123Z"
    fake.advance(1)
    again = (await client.put(f"{ISSUES}/1", json={"state_event": "close"})).json()
    assert again["updated_at"] == "2026-11-30T06:43:16.123Z"  # no-op: untouched
    reopened = (await client.put(f"{ISSUES}/1", json={"state_event": "reopen"})).json()
    assert (reopened["state"], reopened["closed_at"], reopened["closed_by"]) == (
        "opened", None, None,
    )  # fmt: skip
    unassigned = (await client.put(f"{ISSUES}/1", json={"assignee_ids": []})).json()
    assert unassigned["assignees"] == []
    assert unassigned["assignee"] is None
    fake.advance(1)
    note = await client.post(f"{ISSUES}/1/notes", json={"body": "On it"})
    assert note.status_code == 201
    assert (note.json()["noteable_iid"], note.json()["author"]["username"]) == (1, "cotal-bot")
    assert fake.issue_json(PROJECT, 1)["updated_at"] == "2026-11-30T06:43:18.123Z"
    assert fake.issue_json(PROJECT, 1)["user_notes_count"] == 1
    empty = await client.put(f"{ISSUES}/1", json={})
    assert empty.status_code == 400
    assert "at least one parameter" in empty.json()["error"]
    bad = await client.put(f"{ISSUES}/1", json={"state_event": "closed"})
    assert bad.json() == {"error": "state_event does not have a valid value"}
    assert (await client.post(ISSUES, json={})).json() == {"error": "title is missing"}
    form = await client.post(ISSUES, data={"title": "form", "labels": "a,b"})
    assert (form.status_code, form.json()["labels"]) == (201, ["a", "b"])


async def test_free_tier_lets_scoped_labels_coexist(client: httpx.AsyncClient) -> None:
    free = FakeGitLab(clock=FakeClock(START), exclusive_scoped_labels=False)
    free.add_issue(PROJECT, labels=["workflow::todo"])
    async with free.client() as c:
        r = await c.put(f"{ISSUES}/1", json={"add_labels": "workflow::done"})
    assert r.json()["labels"] == ["workflow::todo", "workflow::done"]


# -- merge requests ----------------------------------------------------------------------


async def test_merge_request_links_and_pipeline(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.add_issue(PROJECT, "target", updated_at="2026-11-30T06:00:00.000Z")
    fake.add_issue(PROJECT, "mentioned only")
    mr = fake.add_merge_request(
        PROJECT, "Fix target", source_branch="1-fix", closes=[1], mentions=[2],
        pipeline_status="running",
    )  # fmt: skip
    assert mr["description"] == "Closes #1"
    assert fake.issue_json(PROJECT, 1)["updated_at"] == START  # system note touched it
    related = (await client.get(f"{ISSUES}/2/related_merge_requests")).json()
    assert [m["iid"] for m in related] == [1]
    closing = (await client.get(f"{ISSUES}/1/closed_by")).json()
    assert [(m["iid"], m["source_branch"]) for m in closing] == [(1, "1-fix")]
    assert (await client.get(f"{ISSUES}/2/closed_by")).json() == []
    single = (await client.get(f"/projects/{ENCODED}/merge_requests/1")).json()
    pipeline = single["head_pipeline"]
    assert (pipeline["status"], pipeline["sha"]) == ("running", single["sha"])
    assert pipeline["web_url"].startswith("https://gitlab.example.com/acme/widgets/-/pipelines/")
    fake.set_pipeline_status(PROJECT, 1, "success")
    fake.advance(60)
    fake.merge_merge_request(PROJECT, 1, by="erin")
    issue = (await client.get(f"{ISSUES}/1")).json()
    assert (issue["state"], issue["closed_by"]["username"]) == ("closed", "erin")
    merged = (await client.get(f"/projects/{ENCODED}/merge_requests/1")).json()
    assert (merged["state"], merged["head_pipeline"]["status"]) == ("merged", "success")
    assert [m["state"] for m in (await client.get(f"{ISSUES}/1/closed_by")).json()] == ["merged"]


# -- webhooks ----------------------------------------------------------------------------


def test_webhook_headers_and_payloads(fake: FakeGitLab) -> None:
    fake.add_issue(PROJECT, "Hooked", labels=["workflow::todo"], assignees=["dana"])
    fake.add_merge_request(PROJECT, "Fix", source_branch="fix", closes=[1])
    fake.advance(2)
    issue = fake.issue(PROJECT, 1)
    fake.set_labels(issue, ["workflow::in progress"])
    payload = issue_hook_payload(fake, PROJECT, 1, "update", previous_labels=["workflow::todo"])
    body, headers = gitlab_webhook("s3cret", payload)
    assert headers["X-Gitlab-Token"] == "s3cret"
    assert headers["X-Gitlab-Event"] == "Issue Hook"
    assert headers["X-Gitlab-Webhook-UUID"] == DEFAULT_WEBHOOK_UUID
    assert headers["X-Gitlab-Event-UUID"] != headers["Idempotency-Key"]
    assert headers["X-Gitlab-Instance"] == "https://gitlab.example.com"
    sent = json.loads(body)
    assert (sent["object_kind"], sent["event_type"]) == ("issue", "issue")
    attrs = sent["object_attributes"]
    assert (attrs["iid"], attrs["action"], attrs["state"]) == (1, "update", "opened")
    assert sent["project"]["path_with_namespace"] == PROJECT
    labels = sent["changes"]["labels"]
    assert [lb["title"] for lb in labels["previous"]] == ["workflow::todo"]
    assert [lb["title"] for lb in labels["current"]] == ["workflow::in progress"]
    assert sent["changes"]["updated_at"]["current"] == "2026-11-30 06:43:16 UTC"
    assert [a["username"] for a in sent["assignees"]] == ["dana"]
    retry = gitlab_webhook("s3cret", payload, idempotency_key=headers["Idempotency-Key"])[1]
    assert retry["Idempotency-Key"] == headers["Idempotency-Key"]
    assert "X-Gitlab-Token" not in gitlab_webhook(None, payload)[1]
    fake.close_issue(PROJECT, 1, by="dana")
    closed = issue_hook_payload(fake, PROJECT, 1, "close", time_format="iso")
    assert closed["changes"]["state_id"] == {"previous": 1, "current": 2}
    assert closed["user"]["username"] == "dana"
    assert closed["object_attributes"]["closed_at"] == "2026-11-30T06:43:16.123Z"
    mr = merge_request_hook_payload(fake, PROJECT, 1, "open")
    assert mr["object_kind"] == "merge_request"
    assert mr["object_attributes"]["description"] == "Closes #1"
    assert mr["object_attributes"]["head_pipeline_id"] is not None
    fake.add_note(PROJECT, 1, "Looks good", author="erin")
    note = note_hook_payload(fake, PROJECT, 1)
    assert (note["object_kind"], note["object_attributes"]["noteable_type"]) == ("note", "Issue")
    assert note["object_attributes"]["note"] == "Looks good"
    assert note["issue"]["iid"] == 1
    assert note["user"]["username"] == "erin"


# -- the request log ---------------------------------------------------------------------


async def test_request_log(fake: FakeGitLab, client: httpx.AsyncClient) -> None:
    fake.add_issue(PROJECT)
    await client.get(ISSUES, params={"state": "opened"})
    await client.put(f"{ISSUES}/1", json={"labels": "bug"})
    await client.get("/nowhere")
    assert [(r.method, r.path, r.status) for r in fake.requests] == [
        ("GET", "/api/v4/projects/acme%2Fwidgets/issues", 200),
        ("PUT", "/api/v4/projects/acme%2Fwidgets/issues/1", 200),
        ("GET", "/api/v4/nowhere", 404),
    ]
    first = fake.requests[0]
    assert first.query == {"state": "opened"}
    assert first.headers["private-token"] == fake.token
    assert [w.body for w in fake.writes] == [{"labels": "bug"}]
    assert len(fake.calls("PUT", "*/issues/*")) == 1
    assert fake.calls(status=404)[0].path == "/api/v4/nowhere"
