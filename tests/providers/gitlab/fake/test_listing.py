"""The fake GitLab listing issues: offset and keyset pagination, the offset cap, filters,
and the shape of an issue."""

from __future__ import annotations

import base64
import json

import httpx

from tests.providers.gitlab.fake._support import ISSUES, PROJECT, START, iids
from tests.support.fake_gitlab import FakeClock, FakeGitLab, parse_iso, serve_fake_gitlab

# -- offset pagination -------------------------------------------------------------------


async def test_offset_pagination_over_loopback(fake: FakeGitLab) -> None:
    fake.bulk_issues(PROJECT, 250)
    async with (
        serve_fake_gitlab(fake) as api,
        httpx.AsyncClient(base_url=api, headers=fake.auth_headers()) as client,
    ):
        assert api.startswith("http://127.0.0.1:")
        assert api.endswith("/api/v4")
        first = await client.get(ISSUES, params={"per_page": 100, "sort": "asc"})
        assert first.status_code == 200
        h = first.headers
        assert (h["x-page"], h["x-per-page"], h["x-next-page"], h["x-prev-page"]) == (
            "1", "100", "2", "",
        )  # fmt: skip
        assert (h["x-total"], h["x-total-pages"]) == ("250", "3")
        assert set(first.links) == {"next", "first", "last"}
        assert first.links["next"]["url"].startswith(f"{api}{ISSUES}?")  # %2F kept
        assert "page=3" in first.links["last"]["url"]
        assert first.json()[0]["_links"]["self"] == f"{api}/projects/4101/issues/1"
        seen, response = iids(first), first
        while "next" in response.links:
            response = await client.get(response.links["next"]["url"])
            seen += iids(response)
        assert seen == list(range(1, 251))
        last = response.headers
        assert (last["x-page"], last["x-next-page"], last["x-prev-page"]) == ("3", "", "2")
        assert set(response.links) == {"prev", "first", "last"}
        assert len(response.json()) == 50
    assert [c.query.get("page") for c in fake.calls("GET", f"/api/v4{ISSUES}")] == [
        None, "2", "3",
    ]  # fmt: skip


async def test_page_size_defaults_order_and_out_of_range(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.bulk_issues(PROJECT, 120)
    default = await client.get(ISSUES)
    assert len(default.json()) == 20
    assert iids(default)[:3] == [120, 119, 118]  # created_at desc by default
    assert default.headers["x-total-pages"] == "6"
    capped = await client.get(ISSUES, params={"per_page": 500})
    assert (len(capped.json()), capped.headers["x-per-page"]) == (100, "100")
    beyond = await client.get(ISSUES, params={"page": 9})
    assert beyond.json() == []
    assert (beyond.headers["x-next-page"], beyond.headers["x-prev-page"]) == ("", "")
    bad = await client.get(ISSUES, params={"page": "two"})
    assert (bad.status_code, bad.json()) == (400, {"error": "page is invalid"})


async def test_totals_and_last_link_omitted_above_10000(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.bulk_issues(PROJECT, 10_001)
    response = await client.get(ISSUES, params={"per_page": 100})
    assert "x-total" not in response.headers
    assert "x-total-pages" not in response.headers
    assert set(response.links) == {"next", "first"}
    assert response.headers["x-next-page"] == "2"
    end = await client.get(ISSUES, params={"per_page": 100, "page": 101})
    assert len(end.json()) == 1
    assert end.headers["x-next-page"] == ""
    assert set(end.links) == {"prev", "first"}
    fake.count_limit = 20_000  # the threshold is a knob
    counted = await client.get(ISSUES, params={"per_page": 100})
    assert (counted.headers["x-total"], counted.headers["x-total-pages"]) == ("10001", "101")
    assert "page=101" in counted.links["last"]["url"]


async def test_offset_cap_refuses_deep_pages(client: httpx.AsyncClient) -> None:
    fake = FakeGitLab(clock=FakeClock(START), max_offset=50_000)
    fake.bulk_issues(PROJECT, 3)
    async with fake.client() as capped:
        ok = await capped.get(ISSUES, params={"per_page": 100, "page": 500})
        assert (ok.status_code, ok.json()) == (200, [])
        refused = await capped.get(ISSUES, params={"per_page": 100, "page": 501})
        assert refused.status_code == 405
        assert refused.json() == {
            "error": "Offset pagination has a maximum allowed offset of 50000 for requests "
            "that return objects of type Issue. Remaining records can be retrieved using "
            "keyset pagination."
        }
        keyset = {"pagination": "keyset", "order_by": "id", "sort": "asc", "page": "9999"}
        assert (await capped.get(ISSUES, params=keyset)).status_code == 200
    # without a cap (the default) deep pages are just empty
    assert (await client.get(ISSUES, params={"page": 10_000})).status_code == 200


# -- keyset pagination -------------------------------------------------------------------


async def test_keyset_pagination_follows_cursor(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.bulk_issues(PROJECT, 250)
    params = {"pagination": "keyset", "order_by": "updated_at", "sort": "asc", "per_page": "100"}
    response = await client.get(ISSUES, params=params)
    assert set(response.links) == {"next"}
    next_url = response.links["next"]["url"]
    assert next_url.startswith(f"http://fake-gitlab/api/v4{ISSUES}?")
    assert "cursor=" in next_url
    for header in ("x-total", "x-total-pages", "x-page", "x-next-page"):
        assert header not in response.headers
    cursor = httpx.URL(next_url).params["cursor"]
    assert json.loads(base64.urlsafe_b64decode(cursor))["_kd"] == "n"
    pages, updated = [response.json()], [i["updated_at"] for i in response.json()]
    while "next" in response.links:
        response = await client.get(response.links["next"]["url"])
        pages.append(response.json())
        updated += [i["updated_at"] for i in response.json()]
    assert [len(p) for p in pages] == [100, 100, 50]
    assert "link" not in response.headers
    assert updated == sorted(updated, key=parse_iso)
    assert len(updated) == 250
    bad = await client.get(ISSUES, params=params | {"cursor": "not-a-cursor"})
    assert bad.status_code == 400


async def test_keyset_ignored_where_unsupported(client: httpx.AsyncClient) -> None:
    old = FakeGitLab(clock=FakeClock(START), keyset_supported=False)  # GitLab < 18.3
    old.bulk_issues(PROJECT, 30)
    params = {"pagination": "keyset", "order_by": "updated_at", "sort": "asc"}
    async with old.client() as c:
        response = await c.get(ISSUES, params=params)
    assert response.headers["x-total"] == "30"
    assert "cursor=" not in response.headers["link"]
    assert "page=2" in response.links["next"]["url"]
    # an order keyset cannot serve falls back to offset pagination as well
    fallback = await client.get(ISSUES, params=params | {"order_by": "popularity"})
    assert fallback.headers["x-page"] == "1"


# -- filters -----------------------------------------------------------------------------


async def test_updated_after_is_inclusive_and_state_defaults_to_all(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.add_issue(PROJECT, "old", updated_at="2026-11-30T05:00:00.000Z")
    fake.add_issue(PROJECT, "edge", updated_at="2026-11-30T06:00:00.000Z")
    fake.add_issue(PROJECT, "new", updated_at="2026-11-30T06:30:00.500Z")
    fake.add_issue(PROJECT, "done", state="closed", updated_at="2026-11-30T06:40:00.000Z")
    params = {"updated_after": "2026-11-30T06:00:00Z", "order_by": "updated_at", "sort": "asc"}
    assert iids(await client.get(ISSUES, params=params)) == [2, 3, 4]
    assert iids(await client.get(ISSUES, params=params | {"state": "opened"})) == [2, 3]
    before = params | {"updated_before": "2026-11-30T06:30:00.500Z"}
    assert iids(await client.get(ISSUES, params=before)) == [2, 3]
    fake.advance(5)
    assert fake.touch(PROJECT, 1) == "2026-11-30T06:43:19.123Z"
    assert iids(await client.get(ISSUES, params=params)) == [2, 3, 4, 1]
    closed = (await client.get(ISSUES, params={"state": "closed"})).json()
    assert closed[0]["closed_at"] == "2026-11-30T06:40:00.000Z"
    bad = await client.get(ISSUES, params={"updated_after": "yesterday"})
    assert (bad.status_code, bad.json()) == (400, {"error": "updated_after is invalid"})
    bad_state = await client.get(ISSUES, params={"state": "open"})
    assert bad_state.json() == {"error": "state does not have a valid value"}


async def test_project_id_forms_and_issue_shape(
    fake: FakeGitLab, client: httpx.AsyncClient
) -> None:
    fake.add_issue(
        PROJECT, "Scoped", "Body", labels=["bug", "workflow::in progress"], assignees=["dana"]
    )
    by_id = (await client.get("/projects/4101/issues/1")).json()
    by_path = (await client.get(f"{ISSUES}/1")).json()
    assert by_id == by_path
    assert by_id["labels"] == ["bug", "workflow::in progress"]
    assert by_id["assignees"][0]["username"] == "dana"
    assert set(by_id["assignees"][0]) >= {"id", "username", "name"}
    assert by_id["references"] == {
        "short": "#1",
        "relative": "#1",
        "full": "acme/widgets#1",
    }
    assert by_id["web_url"] == "https://gitlab.example.com/acme/widgets/-/issues/1"
    assert by_id["created_at"] == START
    missing = await client.get("/projects/acme%2Fnope/issues")
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Project Not Found"})
    unencoded = await client.get("/projects/acme/widgets/issues")
    assert unencoded.status_code == 404
    no_issue = await client.get(f"{ISSUES}/99")
    assert no_issue.json() == {"message": "404 Issue Not Found"}
