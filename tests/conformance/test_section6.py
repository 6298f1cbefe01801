"""Section 6 of the tasks endpoint contract, check by check, over the real wire, through
the very runner ``cotal-tasks conformance`` is.

Every check lives in ``cotal_tasks.client.conformance``; each test here runs one of them
against a real nats-server and the real bridge (SQLite board) and requires it to PASS, so
the command line and this suite cannot drift. The GitHub- and GitLab-backed suites run
the same checks (``passes``) against their endpoints, then assert what the tracker holds.
The seats are named as before (``local.worker``, ``local.w``...), so the trackers' seat
directories map them. Check 9's broker half runs a second nats-server whose users hold
exactly the rows ``cotal-tasks grants`` prints, so the refusal observed is the broker's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.config import EndpointConfig
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.bridge.wiring.process import running_bridge
from cotal_tasks.client.conformance import BY_NAME, Actor, Context, Hooks, run_check
from cotal_tasks.client.conformance.binding import SECRETS, only_record_fields
from cotal_tasks.client.conformance.positive import COMMIT_REF, RUN_REF, PositiveRun, positive_path
from cotal_tasks.core import Seat
from tests.conformance.conftest import Mesh
from tests.conformance.permissioned import (
    Errors,
    _violations,
    permission_rows,
    permissioned_bridge_config,
    permissioned_callers,
    permissioned_users,
)
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, broker, set_up_space
from tests.support.cotal import TestCaller

Json = dict[str, Any]

TOKEN = ENDPOINT.replace(".", "_")
PREFIX = f"cotal.{SPACE}"
BOARD_CHANGED_FILTER = f"{PREFIX}.epe.{TOKEN}.*.*.ev.ai_cotal_tasks.board-changed"
__all__ = ["COMMIT_REF", "RUN_REF", "SECRETS", "PositiveRun", "only_record_fields"]


# -- the runner, on a test mesh ---------------------------------------------------------------


def seat_of(role: str, incarnation: int) -> Seat:
    """The seats the checks play, named as the suites' seat directories know them."""
    if role == "target":
        return seat("worker", 7)
    return seat(role, incarnation)


def _spoiler(mesh: Mesh) -> Any:
    async def spoil() -> None:
        config = mesh.bridge.config
        database = config.endpoints[0].database_url(config.data_dir).removeprefix("sqlite:///")
        await mesh.bridge.endpoints[0].store.close()  # the engine reconnects on next use
        for suffix in ("", "-wal", "-shm"):
            path = Path(database + suffix)
            if suffix == "" or path.exists():
                path.write_bytes(b"this is not an SQLite database, it is garbage \x00\xff" * 512)

    return spoil


_CONTEXTS: weakref.WeakKeyDictionary[NATS, Context] = weakref.WeakKeyDictionary()


def context(mesh: Mesh) -> Context:
    """The runner's context for ``mesh`` (one per mesh, so a run's memo is shared)."""
    found = _CONTEXTS.get(mesh.nc)
    if found is None:
        found = Context(
            mesh.nc, SPACE, ENDPOINT, name_seat=seat_of, hooks=Hooks(spoil_store=_spoiler(mesh))
        )
        _CONTEXTS[mesh.nc] = found
    return found


async def passes(mesh: Mesh | Context, name: str) -> str:
    """Run the runner's check ``name`` (a prefix of its name) and require a PASS."""
    ctx = mesh if isinstance(mesh, Context) else context(mesh)
    (check,) = [c for n, c in BY_NAME.items() if n.startswith(name)]
    result = await run_check(ctx, check)
    assert result.status == "PASS", result.line()
    return result.seen


# -- the helpers the tracker suites share -----------------------------------------------------


def triple(caller: TestCaller) -> Json:
    s = caller.seat
    return {"owner": s.owner, "actor": s.actor, "lifecycleUid": s.lifecycleUid}


def binding_triple(record: Json) -> Json:
    b = record["binding"]
    return {"owner": b["owner"], "actor": b["actor"], "lifecycleUid": b["lifecycleUid"]}


async def create(caller: TestCaller, title: str, **fields: Any) -> Json:
    data: Json = await caller.ok("create-task", {"title": title, **fields})
    assert data["status"] == fields.get("status", "open")
    assert "binding" not in data
    return data


async def claim(caller: TestCaller, task_id: str) -> Json:
    data: Json = await caller.ok("claim-task", {"taskId": task_id}, mode="self")
    return data


async def get(caller: TestCaller, task_id: str) -> Json:
    data: Json = await caller.ok("get-task", {"taskId": task_id})
    return data


async def list_page(caller: TestCaller, **args: Any) -> Json:
    data: Json = await caller.ok("list-tasks", args)
    return data


async def my_ids(caller: TestCaller) -> list[str]:
    page: Json = await caller.ok("my-tasks", {}, mode="self")
    assert "appliedLimit" in page
    return [t["taskId"] for t in page["tasks"]]


def refusal(reply: Json) -> tuple[str, str | None]:
    """A failed reply's (code, outcome); asserts the envelope is a well-formed failure."""
    assert reply["ok"] is False, reply
    assert "data" not in reply, reply
    error: Json = reply["error"]
    return error["code"], error.get("outcome")


async def board_events(nc: NATS) -> tuple[asyncio.Queue[Msg], Any]:
    """Subscribe a reader to the board-changed filter; return its queue and subscription."""
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def put(msg: Msg) -> None:
        await queue.put(msg)

    sub = await nc.subscribe(BOARD_CHANGED_FILTER, cb=put)
    await nc.flush()
    return queue, sub


async def positive_run(mesh: Mesh) -> PositiveRun:
    """Checks 18 to 24, each required to pass, over one run of the positive path."""
    for name in ("18", "19", "20", "21", "22", "23", "24"):
        await passes(mesh, name)
    return await positive_path(context(mesh))


# -- one test per check, on the board ---------------------------------------------------------

ON_THE_BOARD = [name for name in BY_NAME if not name.startswith(("09-broker", "12-"))]


@pytest.mark.parametrize("name", ON_THE_BOARD)
async def test_check(mesh: Mesh, name: str) -> None:
    await passes(mesh, name)


async def test_check_12_list_limit_is_capped_at_ceiling(small_mesh: Mesh) -> None:
    await passes(small_mesh, "12")


# -- 9, the broker half: a permissioned nats-server from `cotal-tasks grants` rows ------


@dataclass
class Permissioned:
    """A broker whose users hold exactly the `cotal-tasks grants` rows, and the bridge on it."""

    log: Path
    seat: TestCaller  # holds tasks.self only
    operator: TestCaller  # holds tasks.read, tasks.write, tasks.bind, tasks.self
    seat_errors: Errors
    operator_errors: Errors
    served: list[tuple[str, str]]  # (command, code) for every request the bridge answered
    routed: list[str]  # every ep.> subject the broker delivered, as an admin sees it

    def bridge_denials(self) -> list[str]:
        return _violations(self.log, "cotal-tasks")


@asynccontextmanager
async def permissioned_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Permissioned]:
    seat_seat, operator_seat = seat("seat", 3), seat("operator", 4)
    data_dir = tmp_path / "bridge"
    # A previous run of this endpoint minted its instance id, so --serve pins it.
    identity = next_incarnation(data_dir, TOKEN)
    serve, seat_rows, operator_rows = await permission_rows(
        tmp_path, data_dir, seat_seat, operator_seat
    )
    assert any(identity.instance_id in row for row in serve["publish"]["allow"]), serve
    assert not any(".bind-task." in row for row in seat_rows["publish"]["allow"]), seat_rows
    assert any(".bind-task.owner.local." in row for row in operator_rows["publish"]["allow"])
    passwords, server_conf = permissioned_users(
        tmp_path, monkeypatch, serve, seat_rows, operator_rows
    )
    served: list[tuple[str, str]] = []

    def on_served(command: str, code: str, _elapsed: float) -> None:
        served.append((command, code))

    async with broker(tmp_path, config_file=server_conf) as server:
        log = server.store_dir / "nats-server.log"
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = permissioned_bridge_config(server.url, data_dir, EndpointConfig(name=ENDPOINT))
        bridge_cm = running_bridge(config, on_served=on_served)
        try:
            bridge = await asyncio.wait_for(bridge_cm.__aenter__(), timeout=20)
        except Exception as exc:
            raise AssertionError(
                "the bridge did not start under its --serve rows; the broker denied: "
                f"{_violations(log, 'cotal-tasks')}"
            ) from exc
        try:
            assert bridge.servers[0].identity.instance_id == identity.instance_id
            seat_errors, operator_errors = Errors(), Errors()
            async with permissioned_callers(
                server.url, passwords, seat_seat, operator_seat, seat_errors, operator_errors
            ) as (seat_caller, operator_caller, routed):
                yield Permissioned(
                    log,
                    seat_caller,
                    operator_caller,
                    seat_errors,
                    operator_errors,
                    served,
                    routed,
                )
        finally:
            await bridge_cm.__aexit__(None, None, None)


async def test_check_09_broker_half_through_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seat holding only tasks.self cannot publish a bind in either mode; the operator's
    credential binds. The broker, not the bridge, refused: the bridge served one bind."""
    async with permissioned_mesh(tmp_path, monkeypatch) as mesh:
        await passes(permissioned_context(mesh.seat, mesh.operator), "09-broker")
        denied = [e for e in mesh.seat_errors.seen if "publish" in str(e).lower()]
        assert len(denied) == 2, mesh.seat_errors.seen
        assert all(".bind-task." in str(e).lower() for e in denied)
        assert not any(".bind-task." in s and ".local.seat." in s for s in mesh.routed)
        assert [served for served in mesh.served if served[0] == "bind-task"] == [
            ("bind-task", "ok")
        ]
        assert mesh.operator_errors.seen == []
        assert mesh.bridge_denials() == []


def permissioned_context(seat_caller: TestCaller, operator: TestCaller) -> Context:
    """The runner on a broker with credentials: every role is given, nothing invented."""
    operator_actor = Actor(operator.seat, operator.nc)
    return Context(
        operator.nc,
        SPACE,
        ENDPOINT,
        given={
            "operator": operator_actor,
            "reader": operator_actor,
            "self-only": Actor(seat_caller.seat, seat_caller.nc),
        },
        invent=False,
        stage=False,
    )
