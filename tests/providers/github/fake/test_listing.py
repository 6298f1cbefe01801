"""The fake GitHub listing issues, and its conditional requests and limits."""

from __future__ import annotations

import httpx

from tests.providers.github.fake._support import ISSUES, REPO, START, numbers
from tests.support.fake_github import FakeGitHub, serve_fake_github

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
