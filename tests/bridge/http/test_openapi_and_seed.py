"""The OpenAPI description covers every route the listener serves (and nothing else), and
its schemas validate real answers; ``make run``'s seed and announcement."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from starlette.routing import Mount, Route

from cotal_tasks.bridge.cli.announce import announcement
from cotal_tasks.bridge.cli.seed import SEED_FILE, seed_examples
from cotal_tasks.bridge.config import BridgeConfig, EndpointConfig, HttpConfig
from cotal_tasks.bridge.http.openapi import openapi_document
from cotal_tasks.bridge.wiring import open_endpoint
from cotal_tasks.bridge.wiring.process import Bridge, running_bridge
from cotal_tasks.core import STATUSES
from tests.bridge.http._support import ACME, open_http_mesh
from tests.conftest import seat

OPERATOR = seat("operator", 9)
Json = dict[str, Any]


def served_paths(bridge: Bridge) -> set[str]:
    """The routes of the app the bridge serves, webhook receivers included."""
    assert bridge.http_app is not None
    paths = set()
    for route in bridge.http_app.asgi.routes:
        if isinstance(route, Mount):
            paths.add(route.path + "/{file}")
        elif isinstance(route, Route):
            paths.add(re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path))
    return paths


async def test_every_route_is_described_and_every_description_served(tmp_path: Path) -> None:
    async with open_http_mesh(tmp_path) as mesh:
        document = await mesh.ok("/v1/openapi.json")
        assert document["openapi"].startswith("3.1")
        assert set(document["paths"]) == served_paths(mesh.bridge)
        for path, item in document["paths"].items():
            for operation in item.values():
                assert operation["summary"], path
                assert "200" in operation["responses"] or "202" in operation["responses"]


def test_the_status_filter_offers_the_contracts_statuses() -> None:
    """The statuses come from the contract's one list, in its order, never typed again."""
    tasks = openapi_document()["paths"]["/v1/endpoints/{name}/tasks"]["get"]
    (status,) = [p for p in tasks["parameters"] if p["name"] == "status"]
    assert status["schema"]["items"]["enum"] == list(STATUSES)


async def test_the_schemas_validate_real_answers(tmp_path: Path) -> None:
    async with open_http_mesh(tmp_path) as mesh:
        document = await mesh.ok("/v1/openapi.json")
        task = await mesh.caller(OPERATOR).ok(
            "create-task", {"title": "x", "evidence": [{"kind": "commit", "ref": "abc"}]}
        )

        def validate(name: str, value: Json) -> None:
            schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
            Draft202012Validator(schema).validate(value)

        validate("TaskPage", await mesh.ok(f"/v1/endpoints/{ACME}/tasks"))
        validate("Task", await mesh.ok(f"/v1/endpoints/{ACME}/tasks/{task['taskId']}"))
        validate("Board", await mesh.ok(f"/v1/endpoints/{ACME}/board"))
        validate("Error", (await mesh.get(f"/v1/endpoints/{ACME}/tasks/absent")).json())


def embedded_default(tmp_path: Path) -> BridgeConfig:
    """``serve`` with no config file (its local reader on), on any free HTTP port."""
    return BridgeConfig(data_dir=tmp_path / "data", http=HttpConfig(port=0, local_reader=True))


async def test_the_seed_runs_once_through_the_command_service(tmp_path: Path) -> None:
    config = embedded_default(tmp_path)
    seeded = await seed_examples(config)
    assert seeded.source == SEED_FILE
    assert seeded.count == 6
    assert {status: len(ids) for status, ids in seeded.task_ids.items()} == {
        "open": 2,
        "claimed": 1,
        "blocked": 1,
        "done": 1,
        "dropped": 1,
    }
    again = await seed_examples(config)
    assert again.count == 0  # the board has changed: never seeded twice
    async with open_endpoint(config, config.endpoints[0]) as endpoint:
        assert await endpoint.store.change_seq() == 12  # 6 creates, 3 claims, 3 updates
        blocked = seeded.task_ids["blocked"][0]
        history = await endpoint.store.history(blocked)
        assert [entry.command for entry in history] == ["create-task", "claim-task", "update-task"]
        assert history[-1].note == "waiting on database credentials from ops"


async def test_the_seed_leaves_a_used_board_alone(tmp_path: Path) -> None:
    config = embedded_default(tmp_path)
    async with open_endpoint(config, config.endpoints[0]) as endpoint:
        from cotal_tasks.bridge.service.commands import Call

        await endpoint.service.handle(Call("create-task", OPERATOR, "e-1", {"title": "mine"}))
    assert (await seed_examples(config)).count == 0
    assert (await seed_examples(config, tmp_path / "missing.json")).count == 0


async def test_the_announcement_names_the_dashboard_and_the_walkthrough(tmp_path: Path) -> None:
    config = embedded_default(tmp_path)
    seeded = await seed_examples(config)
    async with running_bridge(config) as bridge:
        text = "\n".join(await announcement(bridge, seeded, None))
    assert f"Dashboard: {bridge.http_url}/  (loopback: no token needed)" in text
    assert "embedded nats-server" in text
    assert "seeded 6 example tasks from examples/seed-tasks.json" in text
    first_open = seeded.task_ids["open"][0]
    assert "invoke claim-task --as local.builder/" in text  # its one mode, self, by default
    assert f'"taskId":"{first_open}"' in text
    for command in ("describe", "invoke list-tasks", "invoke create-task", "history"):
        assert command in text
    other = BridgeConfig(
        data_dir=tmp_path / "other",
        http=HttpConfig(port=0),
        endpoints=(EndpointConfig(name="com.acme.other"),),
    )
    async with running_bridge(other) as bridge:
        unseeded = await seed_examples(other, tmp_path / "none")
        plain = "\n".join(await announcement(bridge, unseeded, tmp_path / "other.toml"))
    assert "seeded" not in plain
    # no open task: the claim names TASK_ID and says what to put there (before: "t-…")
    assert '"taskId":"TASK_ID"' in plain
    assert "put the taskId create-task printed for TASK_ID" in plain
    assert f"invoke claim-task --config {tmp_path / 'other.toml'} --as" in plain
    # no [[http.tokens]] and no local reader: the banner says closed (before: "loopback: no
    # token needed" whenever the broker was embedded on loopback)
    assert f"Dashboard: {bridge.http_url}/  (closed: every request answers 401" in plain
