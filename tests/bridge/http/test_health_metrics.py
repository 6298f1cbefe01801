"""``/healthz``: liveness and per-endpoint readiness; ``/metrics``: Prometheus text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cotal_tasks.core import StaleMarker
from cotal_tasks.providers.store import SourceState, SyncState, TaskStore
from tests.bridge.http._support import (
    ACME,
    BUILDER,
    OPERATOR,
    OPS,
    READER_ENV,
    SECRETS,
    TOKENS,
    HttpMesh,
    StaleStore,
    bearer,
    damage_board,
    make_stale,
    open_http_mesh,
)
from tests.support.polling import eventually


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path, names=(ACME, OPS)) as running:
        yield running


async def test_a_healthy_bridge_is_ready(mesh: HttpMesh) -> None:
    await mesh.caller(OPERATOR).ok("create-task", {"title": "x"})
    response = await mesh.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["live"] is True
    assert body["broker"] == {"connected": True}
    assert body["endpoints"] == {
        ACME: {
            "provider": "board",
            "changeSeq": 1,
            "storeReadable": True,
            "brokerConnected": True,
            "ready": True,
        },
        OPS: {
            "provider": "board",
            "changeSeq": 0,
            "storeReadable": True,
            "brokerConnected": True,
            "ready": True,
        },
    }


async def test_an_unreadable_store_makes_its_endpoint_unready(mesh: HttpMesh) -> None:
    await damage_board(mesh, OPS)
    response = await mesh.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["live"] is True
    ops = body["endpoints"][OPS]
    assert ops["ready"] is False
    assert ops["storeReadable"] is False
    assert ops["error"]["code"] == "unavailable"
    assert body["endpoints"][ACME]["ready"] is True


async def test_a_stale_endpoint_is_ready_and_says_it_is_stale(mesh: HttpMesh) -> None:
    marker = StaleMarker(staleAsOf=1_780_000_000_000, reason="the last sync was 900 s ago")
    make_stale(mesh, OPS, marker)
    response = await mesh.get("/healthz")
    assert response.status_code == 200
    assert response.json()["endpoints"][OPS]["stale"] == marker.to_json()


class SyncedStore(StaleStore):
    """A mirror that reports its sync state, as a hosted tracker's store does."""

    def __init__(self, inner: TaskStore, marker: StaleMarker, state: SyncState) -> None:
        super().__init__(inner, marker)
        self.state = state

    async def freshness(self) -> StaleMarker | None:
        return self.marker if self.state.failing is not None else None

    async def sync_state(self) -> SyncState | None:
        return self.state


async def test_health_reports_the_last_sync(mesh: HttpMesh) -> None:
    never = StaleMarker(staleAsOf=0, reason="unused")
    acme, ops = mesh.endpoint(ACME).service, mesh.endpoint(OPS).service
    acme.store = SyncedStore(acme.store, never, SyncState(1_780_000_000_000))
    failing = SyncState(1_780_000_000_500, "the tracker answered 502", 1_780_000_000_900)
    ops.store = SyncedStore(ops.store, never, failing)
    body = (await mesh.get("/healthz")).json()
    assert body["endpoints"][ACME]["lastSync"] == 1_780_000_000_000
    assert "stale" not in body["endpoints"][ACME]
    assert body["endpoints"][OPS]["lastSync"] == 1_780_000_000_500
    assert body["endpoints"][OPS]["stale"] == never.to_json()


async def test_health_shows_each_source_of_an_endpoint_over_several(mesh: HttpMesh) -> None:
    """One repository refused for good beside one that syncs: the endpoint is ready, its
    reads stale naming the failing one, and ``sync.sources`` shows each one's state."""
    marker = StaleMarker(staleAsOf=0, reason="GitHub sync is failing: acme/gone: 404")
    widgets = SourceState("acme/widgets", 1_780_000_000_000)
    gone = SourceState("acme/gone", None, "404 Not Found", 1_780_000_000_100, refused=True)
    state = SyncState(None, "acme/gone: 404", 1_780_000_000_100, sources=(widgets, gone))
    acme = mesh.endpoint(ACME).service
    acme.store = SyncedStore(acme.store, marker, state)
    body = (await mesh.get("/healthz")).json()
    entry = body["endpoints"][ACME]
    assert entry["ready"] is True
    assert entry["stale"] == marker.to_json()
    assert entry["sync"]["sources"] == [
        {
            "source": "acme/widgets",
            "lastSync": 1_780_000_000_000,
            "failing": None,
            "failingSince": None,
            "refused": False,
        },
        {
            "source": "acme/gone",
            "lastSync": None,
            "failing": "404 Not Found",
            "failingSince": 1_780_000_000_100,
            "refused": True,
        },
    ]
    scraped = (await mesh.get("/metrics")).text
    assert f'cotal_tasks_sync_source_failing{{endpoint="{ACME}",source="acme/gone"}} 2.0' in scraped
    assert f'cotal_tasks_sync_source_failing{{endpoint="{ACME}",source="acme/widgets"}} 0.0' in (
        scraped
    )


async def test_a_lost_broker_is_unready_and_the_liveness_view_goes_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(READER_ENV, SECRETS[READER_ENV])
    async with open_http_mesh(
        tmp_path, embedded=False, tokens=TOKENS[:1], headers=bearer(READER_ENV)
    ) as mesh:
        operator = mesh.caller(OPERATOR)
        task = await operator.ok("create-task", {"title": "x"})
        await mesh.space.spawn(BUILDER)
        await mesh.caller(BUILDER).ok("claim-task", {"taskId": task["taskId"]}, mode="self")
        board_path = f"/v1/endpoints/{ACME}/board"
        before = await mesh.ok(board_path)
        assert before["presence"]["view"] == "current"
        assert before["liveness"][str(BUILDER)] == {
            "view": "current",
            "seat": "online",
            "lastSeen": before["liveness"][str(BUILDER)]["lastSeen"],
        }

        assert mesh.proxy is not None
        await mesh.proxy.cut()
        await eventually(lambda: not mesh.bridge.nc.is_connected, what="the bridge disconnected")

        health = await mesh.get("/healthz")
        assert health.status_code == 503
        assert health.json()["broker"] == {"connected": False}
        assert health.json()["endpoints"][ACME]["brokerConnected"] is False
        assert health.json()["endpoints"][ACME]["storeReadable"] is True

        # The board still reads (its store is local), and liveness is marked stale: the
        # last cards read, as of their time, never "offline".
        after = await mesh.ok(board_path)
        assert after["tasks"][0]["status"] == "claimed"
        assert after["presence"]["view"] == "stale"
        assert "broker" in after["presence"]["reason"]
        assert after["liveness"][str(BUILDER)]["view"] == "stale"
        assert after["liveness"][str(BUILDER)]["seat"] == "online"

        await mesh.proxy.mend()  # the bridge reconnects on its own, and is ready again
        await eventually(lambda: mesh.bridge.nc.is_connected, 20, what="the bridge reconnected")
        assert (await mesh.get("/healthz")).status_code == 200


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_metrics_count_commands_latency_and_change_seq(mesh: HttpMesh) -> None:
    operator = mesh.caller(OPERATOR)
    task = await operator.ok("create-task", {"title": "x"})
    await mesh.caller(BUILDER).ok("claim-task", {"taskId": task["taskId"]}, mode="self")
    await mesh.ok(f"/v1/endpoints/{ACME}/tasks")
    assert (await mesh.get(f"/v1/endpoints/{ACME}/tasks/t-absent")).status_code == 404

    async with mesh.http.stream("GET", "/v1/events"):
        response = await mesh.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    got = samples(text)

    def command(name: str, code: str, transport: str) -> float:
        labels = {"code": code, "command": name, "endpoint": ACME, "transport": transport}
        return got[("cotal_tasks_commands_total", tuple(sorted(labels.items())))]

    assert command("create-task", "ok", "wire") == 1
    assert command("claim-task", "ok", "wire") == 1
    assert command("list-tasks", "ok", "http") == 1
    assert command("get-task", "not-found", "http") == 1
    latency = (("command", "claim-task"), ("endpoint", ACME), ("transport", "wire"))
    assert got[("cotal_tasks_command_seconds_count", latency)] == 1
    assert got[("cotal_tasks_change_seq", (("endpoint", ACME),))] == 2
    assert got[("cotal_tasks_change_seq", (("endpoint", OPS),))] == 0
    assert got[("cotal_tasks_http_event_streams", ())] == 1
    route = (("route", "/v1/endpoints/{name}/tasks"), ("status", "200"))
    assert got[("cotal_tasks_http_requests_total", route)] == 1
    # Defined for the hosted trackers, which feed them; present before they do.
    assert "# TYPE cotal_tasks_sync_requests_total counter" in text
    assert "# TYPE cotal_tasks_rate_limit_wait_seconds_total counter" in text


async def test_the_board_feed_reads_one_page_per_column_and_serves_no_get_task(
    mesh: HttpMesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = mesh.caller(OPERATOR)
    ids = [
        (await operator.ok("create-task", {"title": f"t{n}", "brief": "b"}))["taskId"]
        for n in range(4)
    ]
    for task_id in ids[:2]:
        await mesh.caller(BUILDER).ok("claim-task", {"taskId": task_id}, mode="self")
    store = mesh.endpoint(ACME).service.store
    calls: list[str] = []
    for method in ("get", "get_json", "page", "page_json", "page_records", "page_records_json"):
        inner = getattr(store, method)

        def counting(*args: Any, _inner: Any = inner, _name: str = method) -> Any:
            calls.append(_name)
            return _inner(*args)

        monkeypatch.setattr(store, method, counting)

    columns = ("open", "claimed", "done")
    pages = [await mesh.ok(f"/v1/endpoints/{ACME}/board?status={s}") for s in columns]
    assert len(calls) == len(columns)  # one store read per column, none per task
    assert set(calls) == {"page_records_json"}
    assert [[t["taskId"] for t in page["tasks"]] for page in pages] == [ids[2:], ids[:2], []]
    monkeypatch.undo()
    for task in pages[1]["tasks"]:
        assert task == await mesh.ok(f"/v1/endpoints/{ACME}/tasks/{task['taskId']}")
        assert task["brief"] == "b"

    got = samples((await mesh.get("/metrics")).text)
    http = {
        dict(labels)["command"]: value
        for (name, labels), value in got.items()
        if name == "cotal_tasks_commands_total" and dict(labels)["transport"] == "http"
    }
    assert http == {"list-tasks": len(columns), "get-task": 2}  # the two reads above
