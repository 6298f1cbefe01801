"""A read answered in the turn it arrives gives the reply the full path gives: a task's
JSON, serialised once, is serialised anew when the task changes, and over the real wire a
read after a write sees the write. (What admission remembers: test_wire_remembered.)"""

from __future__ import annotations

import orjson
import pytest

from cotal_tasks.bridge.wire import envelope, replies
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is


def test_a_tasks_json_is_serialised_once_and_anew_when_it_changes() -> None:
    serialised = replies.Serialised()
    first = {"taskId": "t-1", "title": "first"}
    fragment = serialised.task(first)
    assert serialised.task(first) is fragment
    changed = {"taskId": "t-1", "title": "changed"}  # the store hands out a new dict
    reply = envelope.ok_reply("r", serialised.task(changed))
    assert orjson.loads(replies.encode(reply, None))["data"] == changed
    assert orjson.loads(replies.encode(envelope.ok_reply("r", fragment), None))["data"] == first


def test_what_is_kept_serialised_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replies, "HELD_BYTES", 200)
    serialised = replies.Serialised()
    tasks = [{"taskId": f"t-{n}", "title": "x" * 50} for n in range(20)]
    for task in tasks:
        serialised.task(task)
        assert serialised._bytes <= 200
    last = tasks[-1]
    assert orjson.loads(bytes(replies.encode({"d": serialised.task(last)}, None)))["d"] == last


async def test_a_read_over_the_wire_sees_the_write_before_it(mesh: Mesh) -> None:
    worker = mesh.caller("worker")
    await mesh.space.present(worker.seat)
    task_id = (await worker.ok("create-task", {"title": "before"}))["taskId"]
    for _ in range(3):  # read until the bridge holds the task and its JSON
        assert (await worker.ok("get-task", {"taskId": task_id}))["title"] == "before"
    claimed = await worker.ok("claim-task", {"taskId": task_id}, mode="self")
    read = await worker.ok("get-task", {"taskId": task_id})
    assert read == claimed
    assert read["status"] == "claimed"
    missing = await worker.call("get-task", {"taskId": "t-000000000000"})
    assert missing["error"]["code"] == "not-found"
