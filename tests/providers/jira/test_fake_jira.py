"""The fake Jira itself: it reads only the JQL the provider sends (anything else is 400,
so a typo in the provider's JQL cannot pass unnoticed), pages by ``nextPageToken``,
compares JQL times to the minute in the API user's zone, and refuses transitions as a
workflow would."""

from __future__ import annotations

from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

SEARCH = "/rest/api/3/search/jql"


async def test_unknown_jql_is_refused() -> None:
    fake = FakeJira()
    async with fake.client() as http:
        reply = await http.post(SEARCH, json={"jql": 'project = "DEMO" AND priority = High'})
    assert reply.status_code == 400
    assert "does not read" in reply.json()["errorMessages"][0]


async def test_pages_follow_the_token_until_is_last() -> None:
    fake = FakeJira()
    for k in range(5):
        fake.add_issue(PROJECT, f"Issue {k}")
        fake.advance(1)
    body = {"jql": 'project = "DEMO" ORDER BY updated ASC, key ASC', "maxResults": 2}
    keys: list[str] = []
    async with fake.client() as http:
        while True:
            page = (await http.post(SEARCH, json=body)).json()
            keys += [i["key"] for i in page["issues"]]
            if page["isLast"]:
                break
            body = {**body, "nextPageToken": page["nextPageToken"]}
    assert keys == [f"DEMO-{k}" for k in range(1, 6)]


async def test_jql_times_are_minutes_in_the_users_zone() -> None:
    fake = FakeJira(time_zone="Asia/Kolkata")  # UTC+05:30
    fake.clock.set("2026-03-10T10:00:59Z")
    fake.add_issue(PROJECT, "at 15:30:59 in Kolkata")
    async with fake.client() as http:
        hits = []
        for minute in ("2026-03-10 15:30", "2026-03-10 15:31"):
            jql = f'project = "DEMO" AND updated >= "{minute}" ORDER BY updated ASC'
            hits.append(len((await http.post(SEARCH, json={"jql": jql})).json()["issues"]))
    assert hits == [1, 0]


async def test_a_transition_missing_its_required_field_is_refused() -> None:
    fake = FakeJira()
    fake.add_issue(PROJECT, "x")
    async with fake.client() as http:
        missing = await http.post(
            "/rest/api/3/issue/DEMO-1/transitions", json={"transition": {"id": "31"}}
        )
        invalid = await http.post(
            "/rest/api/3/issue/DEMO-1/transitions", json={"transition": {"id": "41"}}
        )
    assert (missing.status_code, missing.json()["errors"]) == (
        400,
        {"resolution": "Resolution is required."},
    )
    assert invalid.status_code == 400  # Reopen is not offered from To Do
    assert fake.issue(1).status == "To Do"


async def test_an_unauthenticated_request_is_401() -> None:
    fake = FakeJira()
    async with fake.client() as http:
        reply = await http.get("/rest/api/3/myself", headers={"Authorization": "Basic eDp5"})
    assert reply.status_code == 401
