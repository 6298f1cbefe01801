"""The dashboard feed's liveness: derived from presence cards, with the view's own state
(current, stale, unpopulated); a bound seat that is offline stays bound, and an
unpopulated view never calls anyone offline."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.bridge.http.presence import Card, NoPresenceView, PresenceSnapshot, parse_card
from cotal_tasks.core import Seat
from tests.bridge.http._support import ACME, BUILDER, OPERATOR, REVIEWER, HttpMesh, open_http_mesh
from tests.conftest import seat

OTHER_OLD = seat("other", 3)
OTHER_NEW = seat("other", 4)
NOW = 1_780_000_000_000
Json = dict[str, Any]


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[HttpMesh]:
    async with open_http_mesh(tmp_path) as running:
        yield running


async def claimed_by(mesh: HttpMesh, who: Seat, title: str) -> str:
    task = await mesh.caller(OPERATOR).ok("create-task", {"title": title})
    task_id: str = task["taskId"]
    await mesh.caller(who).ok("claim-task", {"taskId": task_id}, mode="self")
    return task_id


async def put_card(mesh: HttpMesh, key: str, card: Json) -> None:
    kv = await mesh.nc.jetstream().key_value("cotal_presence_conf")
    await kv.put(key, json.dumps(card).encode())


async def board(mesh: HttpMesh) -> Json:
    return await mesh.ok(f"/v1/endpoints/{ACME}/board")


async def test_with_no_card_in_the_space_liveness_is_unpopulated(mesh: HttpMesh) -> None:
    await claimed_by(mesh, BUILDER, "x")
    page = await board(mesh)
    assert page["presence"]["view"] == "unpopulated"
    assert "absence says nothing" in page["presence"]["reason"]
    assert page["liveness"] == {str(BUILDER): {"view": "unpopulated", "seat": "unknown"}}
    assert page["tasks"][0]["binding"]["actor"] == "builder"  # still bound, never unassigned


async def test_online_offline_and_replaced_seats(mesh: HttpMesh) -> None:
    await mesh.space.spawn(BUILDER, environment="env://builder-1")
    await claimed_by(mesh, BUILDER, "online")
    await claimed_by(mesh, REVIEWER, "offline: no card")
    await claimed_by(mesh, OTHER_OLD, "replaced")
    await mesh.space.present(OTHER_NEW)  # the principal is live again, as a new incarnation
    await mesh.caller(OPERATOR).ok("create-task", {"title": "unbound"})

    page = await board(mesh)
    assert page["presence"]["view"] == "current"
    live = page["liveness"]
    assert set(live) == {str(BUILDER), str(REVIEWER), str(OTHER_OLD)}  # bound seats only
    assert live[str(BUILDER)]["seat"] == "online"
    assert live[str(BUILDER)]["view"] == "current"
    assert live[str(BUILDER)]["lastSeen"] > NOW - 10**10
    assert live[str(REVIEWER)] == {"view": "current", "seat": "offline"}
    assert live[str(OTHER_OLD)] == {"view": "current", "seat": "replaced"}
    records = {task["title"]: task for task in page["tasks"]}
    assert records["online"]["binding"]["environment"] == "env://builder-1"
    assert records["offline: no card"]["binding"]["lifecycleUid"] == REVIEWER.lifecycleUid
    assert "binding" not in records["unbound"]


@pytest.mark.parametrize(
    ("card", "state"),
    [
        ({"status": "offline"}, "offline"),
        ({"ts": 1}, "offline"),  # silent past its time to live
        ({"card": {"id": "local.someone_else"}}, "offline"),  # id differs from key: dropped
        ({"ts": "yesterday"}, "offline"),
        ({}, "online"),
    ],
)
async def test_cards_that_do_not_say_online(mesh: HttpMesh, card: Json, state: str) -> None:
    await claimed_by(mesh, BUILDER, "x")
    base: Json = {
        "card": {"id": BUILDER.principal, "name": "builder", "kind": "agent"},
        "lifecycleUid": BUILDER.lifecycleUid,
        "status": "working",
        "ts": int(time.time() * 1000),
    }
    await put_card(mesh, BUILDER.principal, {**base, **card})
    assert (await board(mesh))["liveness"][str(BUILDER)]["seat"] == state


# -- the view's logic, without a broker -------------------------------------------------


def test_a_current_view_tells_online_from_offline() -> None:
    snapshot = PresenceSnapshot(
        "current",
        NOW,
        cards={
            BUILDER.principal: Card(BUILDER.lifecycleUid, NOW, online=True),
            REVIEWER.principal: None,
            OTHER_OLD.principal: Card(OTHER_NEW.lifecycleUid, NOW, online=True),
        },
    )
    assert snapshot.liveness(BUILDER) == {"view": "current", "seat": "online", "lastSeen": NOW}
    assert snapshot.liveness(REVIEWER) == {"view": "current", "seat": "offline"}
    assert snapshot.liveness(OTHER_OLD) == {"view": "current", "seat": "replaced"}
    assert snapshot.liveness(seat("unread", 5))["seat"] == "unknown"


def test_a_stale_view_reports_the_last_cards_and_an_unpopulated_one_nothing() -> None:
    cards: dict[str, Card | None] = {BUILDER.principal: Card(BUILDER.lifecycleUid, NOW, True)}
    stale = PresenceSnapshot("stale", NOW, "the broker is down", cards)
    assert stale.liveness(BUILDER) == {"view": "stale", "seat": "online", "lastSeen": NOW}
    assert stale.liveness(REVIEWER) == {"view": "stale", "seat": "unknown"}
    assert stale.to_json() == {"view": "stale", "observedAt": NOW, "reason": "the broker is down"}
    empty = PresenceSnapshot("unpopulated", NOW, "no presence", cards)
    assert empty.liveness(BUILDER) == {"view": "unpopulated", "seat": "unknown", "lastSeen": NOW}


async def test_no_presence_source_is_unpopulated() -> None:
    snapshot = await NoPresenceView().snapshot({BUILDER.principal})
    assert snapshot.view == "unpopulated"
    assert snapshot.liveness(BUILDER)["seat"] == "unknown"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        (b"not json", None),
        (b"[]", None),
        (b'{"card": "x"}', None),
        (b'{"card": {"id": "local.other"}}', None),
        (b'{"card": {"id": "local.builder"}, "ts": true}', Card(None, None, False)),
        (
            b'{"card": {"id": "local.builder"}, "lifecycleUid": "u", "ts": 1779999999000}',
            Card("u", 1_779_999_999_000, True),
        ),
        (
            b'{"card": {"id": "local.builder"}, "lifecycleUid": 7, "ts": 1779999000000}',
            Card(None, 1_779_999_000_000, False),
        ),
    ],
)
def test_parse_card(raw: bytes | None, expected: Card | None) -> None:
    assert parse_card("local.builder", raw, NOW) == expected
