"""What the GitHub- and GitLab-backed conformance suites share: the permissioned broker
with a hosted bridge on it (check 9's broker half), the one run of the positive path
(checks 18 to 24), and the checks whose steps are the same on either tracker. A small
per-tracker ``Tracker`` harness says what differs: its config section and what the
tracker holds for an issue."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from nats.aio.msg import Msg

import tests.conformance.test_section6 as section6
from cotal_tasks.bridge.wire.instance import next_incarnation
from cotal_tasks.bridge.wiring.process import running_bridge
from cotal_tasks.core import Seat
from tests.conformance.conftest import Mesh
from tests.conformance.permissioned import (
    Errors,
    permission_rows,
    permissioned_bridge_config,
    permissioned_callers,
    permissioned_users,
)
from tests.conformance.test_section6 import (
    Permissioned,
    PositiveRun,
    binding_triple,
    board_events,
    create,
    get,
    list_page,
    my_ids,
)
from tests.conftest import seat
from tests.providers.hosted_support import HostedMesh, TrackerFake, first_sync
from tests.support.bridge import ENDPOINT, broker, set_up_space
from tests.support.cotal import collect
from tests.support.trackers import Tracker

Json = dict[str, Any]
F = TypeVar("F", bound=TrackerFake)


@asynccontextmanager
async def permissioned_hosted_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tracker: Tracker, api_url: str
) -> AsyncIterator[Permissioned]:
    """As ``section6.permissioned_mesh``, with the endpoint served from the tracker."""
    seat_seat, operator_seat = seat("seat", 3), seat("operator", 4)
    data_dir = tmp_path / "bridge"
    next_incarnation(data_dir, ENDPOINT.replace(".", "_"))
    serve, seat_rows, operator_rows = await permission_rows(
        tmp_path, data_dir, seat_seat, operator_seat, tracker.section(api_url)
    )
    passwords, server_conf = permissioned_users(
        tmp_path, monkeypatch, serve, seat_rows, operator_rows
    )
    async with broker(tmp_path, config_file=server_conf) as server:
        log = server.store_dir / "nats-server.log"
        await set_up_space(server.url, user="admin", password=passwords["admin"])
        config = permissioned_bridge_config(server.url, data_dir, tracker.endpoint(api_url))
        async with running_bridge(config) as bridge:
            await first_sync(bridge)
            seat_errors, operator_errors = Errors(), Errors()
            async with permissioned_callers(
                server.url, passwords, seat_seat, operator_seat, seat_errors, operator_errors
            ) as (seat_caller, operator_caller, routed):
                yield Permissioned(
                    log, seat_caller, operator_caller, seat_errors, operator_errors, [], routed
                )
                assert operator_errors.seen == []


async def check_09_broker_refuses_self_only_bind_and_admits_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tracker: Tracker, fake: Any, api_url: str
) -> None:
    """The runner's broker half of check 9, then what the tracker holds: the refused binds
    never reached the bridge, and the operator's bind labelled the issue."""
    async with permissioned_hosted_mesh(tmp_path, monkeypatch, tracker, api_url) as mesh:
        await section6.passes(section6.permissioned_context(mesh.seat, mesh.operator), "09-broker")
        denied = [e for e in mesh.seat_errors.seen if "publish" in str(e).lower()]
        assert len(denied) == 2, mesh.seat_errors.seen
        assert all(".bind-task." in str(e).lower() for e in denied)
        assert not any(".bind-task." in s and ".local.seat." in s for s in mesh.routed)
        assert tracker.labels_of(fake, "Only an operator binds this") == [tracker.claimed]
        assert len(await my_ids(mesh.seat)) == 1  # the one task the operator bound
        assert mesh.bridge_denials() == []


async def checks_18_to_24(mesh: Mesh) -> PositiveRun:
    """Checks 18 to 24 of the runner, each required to pass, over one run of the
    positive path; returns that run for what the tracker made of it."""
    return await section6.positive_run(mesh)


async def echoes_change_nothing(mesh: HostedMesh[F]) -> None:
    """The bridge's own writes come back on the next poll as echoes: nothing changes."""
    seq = (await list_page(mesh.caller("reader")))["changeSeq"]
    mesh.fake.advance(5)
    assert (await mesh.poll()).changed == 0
    assert (await list_page(mesh.caller("reader")))["changeSeq"] == seq


async def check_10_sync_keeps_binding(
    mesh: HostedMesh[F], task_id: str, retitle: Callable[[str], None], title: str
) -> None:
    """The tracker changes the issue and the sync reads it while the new incarnation of
    its seat is present: the binding stays the old incarnation's."""
    operator, old, new = mesh.caller("operator"), mesh.caller("worker", 1), mesh.caller("worker", 2)
    held = await get(operator, task_id)
    mesh.fake.advance(30)
    retitle(title)
    assert (await mesh.poll()).changed == 1
    record = await get(operator, task_id)
    assert record["title"] == title
    assert record["binding"] == held["binding"]
    assert binding_triple(record) == section6.triple(old)
    assert task_id not in await my_ids(new)


async def check_13_import_filters_secrets(
    mesh: HostedMesh[F], leak: Callable[[str, str], str]
) -> None:
    """What the tracker holds is filtered on the way in: credential-shaped text is left
    out. ``leak(title, body)`` adds an issue on the tracker and returns its task id."""
    mesh.fake.advance(30)
    leaked = leak(section6.SECRETS["title"], section6.SECRETS["brief"])
    await mesh.poll()
    record = await get(mesh.caller("reader"), leaked)
    section6.only_record_fields(record)
    text = json.dumps(record, ensure_ascii=False)
    for secret in section6.SECRETS.values():
        assert secret not in text
    assert "brief" not in record


async def check_23_a_tracker_change_is_announced(
    mesh: HostedMesh[F], title: str, change: Callable[[], None]
) -> Json:
    """A change made on the tracker (``change``) is announced once, with only the counter
    and the time; returns the task as read afterwards."""
    reader = mesh.caller("reader")
    task = await create(reader, title)
    queue, sub = await board_events(mesh.nc)
    mesh.fake.advance(30)
    change()
    assert (await mesh.poll()).changed == 1
    await mesh.nc.flush()
    events: list[Msg] = await collect(queue, 0.5)
    await sub.unsubscribe()
    assert len(events) == 1
    data = json.loads(events[0].data)["data"]
    assert set(data) == {"changeSeq", "observedAt"}
    assert data["changeSeq"] == (await list_page(reader))["changeSeq"]
    assert task["taskId"] not in events[0].data.decode()
    return await get(reader, task["taskId"])


def assert_fresh_import_lost(
    again: Json, other: Json, held: Json, reborn: Seat, claimed: str
) -> None:
    """The account maps back to the principal, but the uid is whatever presence says now,
    and who bound it, when, and the environment are gone; a seat without an account
    shows only the label, so its task reads open, without the evidence posted."""
    assert binding_triple(again) == {
        "owner": "local",
        "actor": "worker",
        "lifecycleUid": reborn.lifecycleUid,
    }
    assert again["binding"]["boundBy"] == "tracker-sync"
    assert "environment" not in again["binding"]
    assert again["binding"] != held["binding"]
    assert (other["status"], other["statusSource"]) == ("open", claimed)
    assert "binding" not in other
    assert other["evidence"] == []  # the run evidence was a comment/note; not read back
