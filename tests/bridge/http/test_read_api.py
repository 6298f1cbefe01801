"""The read API answers what the wire answers: the same page shape, bounds, cursors, stale
marker and error codes, because both call the one command service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import StaleMarker
from tests.bridge._support import PAGE_KEYS
from tests.bridge.http._support import (
    ACME,
    BUILDER,
    OPERATOR,
    OPS,
    HttpMesh,
    damage_board,
    make_stale,
    open_http_mesh,
)
from tests.support.paging import follow_cursor, task_ids

Json = dict[str, Any]


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, names=(ACME, OPS), page_ceiling=5) as running:
        yield running


async def create(mesh: HttpMesh, title: str, endpoint: str = ACME, **fields: Any) -> Json:
    data: Json = await mesh.caller(OPERATOR, endpoint).ok("create-task", {"title": title, **fields})
    return data


def tasks_path(name: str = ACME) -> str:
    return f"/v1/endpoints/{name}/tasks"


def without_time(page: Json) -> Json:
    return {key: value for key, value in page.items() if key != "observedAt"}


async def test_endpoints_lists_what_the_bridge_serves(mesh: HttpMesh) -> None:
    data = await mesh.ok("/v1/endpoints")
    assert data == {
        "space": "conf",
        "endpoints": [
            {"name": ACME, "provider": "board", "pageCeiling": 5},
            {"name": OPS, "provider": "board", "pageCeiling": 5},
        ],
    }


async def test_an_empty_board_is_a_positive_empty_page(mesh: HttpMesh) -> None:
    response = await mesh.get(tasks_path())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    page = response.json()
    assert set(page) == PAGE_KEYS
    assert page["tasks"] == []
    assert page["changeSeq"] == 0
    assert page["appliedLimit"] == 5


async def test_list_and_get_equal_the_wire(mesh: HttpMesh) -> None:
    first = await create(mesh, "one", brief="the first")
    await create(mesh, "two")
    await mesh.caller(BUILDER).ok("claim-task", {"taskId": first["taskId"]}, mode="self")
    wire = mesh.caller(OPERATOR)

    over_http = await mesh.ok(tasks_path())
    over_wire = await wire.ok("list-tasks", {})
    assert without_time(over_http) == without_time(over_wire)

    record = await mesh.ok(f"{tasks_path()}/{first['taskId']}")
    assert record == await wire.ok("get-task", {"taskId": first["taskId"]})
    assert record["status"] == "claimed"
    assert record["brief"] == "the first"
    assert record["binding"]["lifecycleUid"] == BUILDER.lifecycleUid


async def test_endpoints_are_kept_apart(mesh: HttpMesh) -> None:
    await create(mesh, "acme task")
    await create(mesh, "ops task", OPS)
    titles = {
        name: [t["title"] for t in (await mesh.ok(tasks_path(name)))["tasks"]]
        for name in (ACME, OPS)
    }
    assert titles == {ACME: ["acme task"], OPS: ["ops task"]}


async def test_pages_follow_cursors_and_report_the_ceiling(mesh: HttpMesh) -> None:
    made = [(await create(mesh, f"task {n}"))["taskId"] for n in range(12)]
    pages = await follow_cursor(
        lambda params: mesh.ok(tasks_path(), params=params), {"limit": "500"}
    )
    # asked for 500, narrowed to the ceiling, and told so on every page
    assert [page["appliedLimit"] for page in pages] == [5, 5, 5]
    assert task_ids(pages) == made
    small = await mesh.ok(tasks_path(), params={"limit": "2"})
    assert small["appliedLimit"] == 2
    assert len(small["tasks"]) == 2


async def test_status_filters_repeat_or_take_commas(mesh: HttpMesh) -> None:
    await create(mesh, "open one")
    await create(mesh, "done one", status="done")
    await create(mesh, "dropped one", status="dropped")
    repeated = await mesh.ok(tasks_path(), params=[("status", "done"), ("status", "dropped")])
    commas = await mesh.ok(tasks_path(), params={"status": "done,dropped"})
    assert [t["title"] for t in repeated["tasks"]] == ["done one", "dropped one"]
    assert repeated["tasks"] == commas["tasks"]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=0", "limit"),
        ("limit=99999999999999999999999", "limit"),
        ("limit=1&limit=2", "once"),
        ("status=finished", "status"),
        ("status=", "status"),
        ("cursor=%21%21", "cursor"),
        ("cursor=eyJwIjogMX0", "cursor"),
        ("owner=local", "owner"),
    ],
)
async def test_bad_input_is_a_400_with_the_code(mesh: HttpMesh, query: str, words: str) -> None:
    response = await mesh.get(f"{tasks_path()}?{query}")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(response.json()) == {"error"}
    assert set(error) == {"code", "message"}
    assert error["code"] == "bad-request"
    assert words in error["message"]


async def test_a_cursor_from_another_query_is_refused(mesh: HttpMesh) -> None:
    for n in range(7):
        await create(mesh, f"task {n}")
    cursor = (await mesh.ok(tasks_path()))["nextCursor"]
    response = await mesh.get(tasks_path(), params={"cursor": cursor, "status": "open"})
    assert response.status_code == 400
    assert "different list-tasks query" in response.json()["error"]["message"]


async def test_get_takes_no_query_parameters(mesh: HttpMesh) -> None:
    task = await create(mesh, "x")
    response = await mesh.get(f"{tasks_path()}/{task['taskId']}", params={"limit": "1"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad-request"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/endpoints/com.nowhere.tasks/tasks",
        "/v1/endpoints/com.nowhere.tasks/tasks/t-1",
        "/v1/endpoints/com.nowhere.tasks/board",
        f"/v1/endpoints/{ACME}/tasks/t-absent",
        "/v1/no-such-route",
    ],
)
async def test_not_found_is_a_404_with_the_code(mesh: HttpMesh, path: str) -> None:
    response = await mesh.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not-found"


async def test_a_task_id_with_a_slash_reaches_get_task(mesh: HttpMesh) -> None:
    response = await mesh.get(f"{tasks_path()}/acme/app%2312")
    assert response.status_code == 404
    assert "'acme/app#12'" in response.json()["error"]["message"]


async def test_writes_are_not_served(mesh: HttpMesh) -> None:
    response = await mesh.http.post(tasks_path(), json={"title": "x"})
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "bad-request"
    assert "read-only" in response.json()["error"]["message"]


async def test_an_unreadable_board_is_a_503_never_an_empty_page(mesh: HttpMesh) -> None:
    task = await create(mesh, "x")
    await create(mesh, "on the other endpoint", OPS)
    await damage_board(mesh, ACME)
    for path in (tasks_path(), f"{tasks_path()}/{task['taskId']}", f"/v1/endpoints/{ACME}/board"):
        response = await mesh.get(path)
        assert response.status_code == 503, (path, response.text)
        assert response.headers["retry-after"]
        error = response.json()["error"]
        assert error["code"] == "unavailable"
        assert "retry" in error["message"]
    # The wire says the same, and the other endpoint still serves.
    assert await mesh.caller(OPERATOR).refused("list-tasks", {}) == "unavailable"
    assert len((await mesh.ok(tasks_path(OPS)))["tasks"]) == 1


async def test_a_stale_store_labels_every_page(mesh: HttpMesh) -> None:
    task = await create(mesh, "x")
    marker = StaleMarker(staleAsOf=1_780_000_000_000, reason="the tracker sync is failing")
    make_stale(mesh, ACME, marker)
    page = await mesh.ok(tasks_path())
    assert page["stale"] == marker.to_json()
    assert page["tasks"][0]["taskId"] == task["taskId"]
    wire = await mesh.caller(OPERATOR).ok("list-tasks", {})
    assert wire["stale"] == page["stale"]
    board = await mesh.ok(f"/v1/endpoints/{ACME}/board")
    assert board["stale"] == marker.to_json()
    assert "stale" not in await mesh.ok(tasks_path(OPS))


def test_a_tracker_endpoint_says_where_its_tasks_pages_are() -> None:
    from cotal_tasks.bridge.config import EndpointConfig
    from cotal_tasks.bridge.http.api import describe_endpoint
    from cotal_tasks.providers.github.config import GitHubConfig
    from cotal_tasks.providers.gitlab.config import GitLabConfig

    def link(settings: Any) -> str | None:
        described = describe_endpoint("x", EndpointConfig(name="x", settings=settings))
        found: str | None = described.get("taskLink")
        return found

    assert link(GitHubConfig(repository="acme/widgets")) == (
        "https://github.com/acme/widgets/issues/{number}"
    )
    enterprise = GitHubConfig(repository="acme/widgets", api_url="https://git.acme.test/api/v3")
    assert link(enterprise) == "https://git.acme.test/acme/widgets/issues/{number}"
    assert link(GitLabConfig(project="acme/platform/api")) == (
        "https://gitlab.com/acme/platform/api/-/issues/{number}"
    )
    assert link(GitLabConfig(project="4242")) is None  # no path to build a page from
    assert "taskLink" not in describe_endpoint("b", EndpointConfig(name="b"))  # a board
