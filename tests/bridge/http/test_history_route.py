"""``GET /v1/endpoints/{name}/history`` on a real listener: the store's append-only history
(what the CLI's ``history`` prints) of one task or of the whole endpoint, paged with the
read API's cursors, bounds, tokens and error codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import StaleMarker
from tests.bridge.http._support import (
    ACME,
    BUILDER,
    OPERATOR,
    OPS,
    READER_ENV,
    SEAT_ENV,
    TOKENS,
    HttpMesh,
    bearer,
    damage_board,
    make_stale,
    open_http_mesh,
    set_secrets,
)
from tests.support.paging import follow_cursor

Json = dict[str, Any]


def history_path(name: str = ACME) -> str:
    return f"/v1/endpoints/{name}/history"


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, names=(ACME, OPS)) as running:
        yield running


async def made_history(mesh: HttpMesh) -> tuple[str, str]:
    operator, builder = mesh.caller(OPERATOR), mesh.caller(BUILDER)
    first = (await operator.ok("create-task", {"title": "Ship the release notes"}))["taskId"]
    second = (await operator.ok("create-task", {"title": "Rotate the keys"}))["taskId"]
    await builder.ok("claim-task", {"taskId": first}, mode="self")
    await builder.ok(
        "update-task",
        {"taskId": first, "status": "blocked", "note": "waiting on legal"},
        mode="self",
    )
    return first, second


def assert_refused(response: Any, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"]


async def test_one_tasks_history_is_what_the_store_keeps(mesh: HttpMesh) -> None:
    first, _ = await made_history(mesh)
    page = await mesh.ok(history_path(), params={"taskId": first})
    assert page["endpoint"] == ACME
    assert page["appliedLimit"] == 1000
    assert "nextCursor" not in page
    assert "stale" not in page
    assert page["changeSeq"] == 4
    kept = await mesh.endpoint(ACME).store.history(first)
    assert page["entries"] == [
        {
            "taskId": first,
            "at": entry.at,
            "command": entry.command,
            "actor": entry.actor,
            "status": entry.status,
            **({"note": entry.note} if entry.note else {}),
        }
        for entry in kept
    ]
    assert [(e["command"], e["status"], e.get("note")) for e in page["entries"]] == [
        ("create-task", "open", None),
        ("claim-task", "claimed", None),
        ("update-task", "blocked", "waiting on legal"),
    ]
    assert page["entries"][1]["actor"] == str(BUILDER)


async def test_the_endpoints_history_pages_and_follows(mesh: HttpMesh) -> None:
    first, second = await made_history(mesh)

    async def fetch(args: Json) -> Json:
        return await mesh.ok(history_path(), params=args)

    pages = await follow_cursor(fetch, {"limit": 3})
    assert [len(page["entries"]) for page in pages] == [3, 1]
    assert all(page["appliedLimit"] == 3 for page in pages)
    seen = [(e["taskId"], e["command"]) for page in pages for e in page["entries"]]
    assert seen == [
        (first, "create-task"),
        (second, "create-task"),
        (first, "claim-task"),
        (first, "update-task"),
    ]
    # The last page has no nextCursor, but its followCursor reads only what came after.
    follow = pages[-1]["followCursor"]
    assert (await fetch({"cursor": follow}))["entries"] == []
    await mesh.caller(BUILDER).ok("claim-task", {"taskId": second}, mode="self")
    later = await fetch({"cursor": follow})
    assert [(e["taskId"], e["status"]) for e in later["entries"]] == [(second, "claimed")]
    # A larger limit is narrowed to the ceiling and says so; the other endpoint is its own.
    assert (await fetch({"limit": "5000"}))["appliedLimit"] == 1000
    assert (await mesh.ok(history_path(OPS)))["entries"] == []
    # Each page is counted as a served history read over HTTP.
    counted = [
        line
        for line in (await mesh.get("/metrics")).text.splitlines()
        if line.startswith("cotal_tasks_commands_total{") and 'command="history"' in line
    ]
    assert any(f'endpoint="{ACME}"' in line and 'transport="http"' in line for line in counted)


async def test_bad_input_is_refused_with_the_remedy(mesh: HttpMesh) -> None:
    first, _ = await made_history(mesh)
    one = await mesh.ok(history_path(), params={"taskId": first, "limit": 1})
    cases: list[tuple[Json | list[tuple[str, str]], int, str, str]] = [
        ({"status": "open"}, 400, "bad-request", "Remove status"),
        ({"limit": "0"}, 400, "bad-request", "at least 1"),
        ({"limit": "many"}, 400, "bad-request", "whole number"),
        ({"cursor": "not-a-cursor"}, 400, "bad-request", "omit cursor"),
        # A cursor of one task's history does not continue the endpoint's.
        ({"cursor": one["nextCursor"]}, 400, "bad-request", "different history query"),
        ([("taskId", first), ("taskId", first)], 400, "bad-request", "Give it once"),
        ({"taskId": "x" * 129}, 400, "bad-request", "128 bytes"),
        ({"taskId": "t-absent"}, 404, "not-found", "t-absent"),
    ]
    for params, status, code, words in cases:
        assert_refused(await mesh.get(history_path(), params=params), status, code, words)
    assert_refused(
        await mesh.get(history_path("com.acme.nothing")), 404, "not-found", "GET /v1/endpoints"
    )
    # The task's own cursor continues its own history.
    rest = await mesh.ok(history_path(), params={"taskId": first, "cursor": one["nextCursor"]})
    assert [e["command"] for e in rest["entries"]] == ["claim-task", "update-task"]


async def test_a_stale_store_labels_and_a_broken_one_is_unavailable(mesh: HttpMesh) -> None:
    await made_history(mesh)
    make_stale(mesh, ACME, StaleMarker(staleAsOf=1_780_000_000_000, reason="sync is failing"))
    page = await mesh.ok(history_path())
    assert page["stale"] == {"staleAsOf": 1_780_000_000_000, "reason": "sync is failing"}
    await damage_board(mesh, OPS)
    response = await mesh.get(history_path(OPS))
    assert_refused(response, 503, "unavailable")
    assert response.headers["retry-after"] == "5"


async def test_tokens_gate_it_as_every_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_secrets(monkeypatch)
    async with open_http_mesh(tmp_path, tokens=TOKENS) as mesh:
        await mesh.caller(OPERATOR).ok("create-task", {"title": "one"})
        assert_refused(await mesh.get(history_path()), 401, "unauthenticated")
        seat_only = await mesh.get(history_path(), headers=bearer(SEAT_ENV))
        assert_refused(seat_only, 403, "permission-denied")
        page = await mesh.ok(history_path(), headers=bearer(READER_ENV))
        assert [e["command"] for e in page["entries"]] == ["create-task"]


async def test_the_route_is_described(mesh: HttpMesh) -> None:
    document = await mesh.ok("/v1/openapi.json")
    route = document["paths"]["/v1/endpoints/{name}/history"]["get"]
    assert {p["name"] for p in route["parameters"]} == {"name", "cursor", "limit", "taskId"}
    assert set(route["responses"]) == {"200", "400", "401", "403", "404", "503"}
    assert "HistoryPage" in document["components"]["schemas"]
