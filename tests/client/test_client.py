"""The typed client against a real bridge on a real nats-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg

from cotal_tasks.bridge.embedded import free_port
from cotal_tasks.client import (
    BoardChanged,
    ErrorCode,
    EvidenceInput,
    Task,
    TaskPage,
    TasksClient,
    TasksError,
    subjects,
)
from cotal_tasks.client import wire as client_wire
from cotal_tasks.client.client import CONNECT_ATTEMPTS
from tests.client.conftest import PAGE_CEILING, Board
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, bridge_on, broker, set_up_space
from tests.support.tcp_proxy import TcpProxy

REQUESTS = f"cotal.{SPACE}.ep.>"


async def spy_requests(board: Board, command: str) -> list[dict[str, Any]]:
    """Every request envelope for ``command`` that reaches the broker from now on."""
    seen: list[dict[str, Any]] = []

    async def record(msg: Msg) -> None:
        if f".{command}." in msg.subject and ".reply." not in msg.subject:
            seen.append(json.loads(msg.data))

    await board.nc.subscribe(REQUESTS, cb=record)
    await board.nc.flush()
    return seen


async def test_typed_round_trip(board: Board) -> None:
    operator, worker = board.client("operator"), board.client("worker")
    created = await operator.create_task("Rotate the certificates", brief="Before Friday.")
    assert isinstance(created, Task)
    assert (created.status, created.binding) == ("open", None)

    claimed = await worker.claim_task(created.taskId)
    assert claimed.status == "claimed"
    assert claimed.binding is not None
    assert claimed.binding.ref().model_dump() == {
        "owner": "local",
        "actor": "worker",
        "lifecycleUid": worker.seat.lifecycleUid,
    }

    done = await worker.update_task(
        created.taskId,
        status="done",
        note="Merged.",
        evidence=[EvidenceInput(kind="commit", ref="9f2c1e7"), {"kind": "run", "ref": "ci/42"}],
    )
    assert done.status == "done"
    assert [(e.kind, e.ref) for e in done.evidence] == [("commit", "9f2c1e7"), ("run", "ci/42")]
    assert await operator.get_task(created.taskId) == done

    page = await operator.list_tasks(status="done")
    assert isinstance(page, TaskPage)
    assert [t.taskId for t in page.tasks] == [created.taskId]
    mine = await worker.my_tasks()
    assert [t.taskId for t in mine.tasks] == [created.taskId]
    service = await operator.describe()
    assert set(service.commands) >= {"list-tasks", "claim-task", "update-task"}
    assert service.commands["claim-task"].targeting() == "targeted, mode self"


async def test_refusals_are_tasks_errors(board: Board) -> None:
    operator, holder, other = board.client("operator"), board.client("h"), board.client("o")
    task = await operator.create_task("Held")
    await holder.claim_task(task.taskId)

    with pytest.raises(TasksError) as taken:
        await other.claim_task(task.taskId)
    assert taken.value.code is ErrorCode.CONFLICT
    assert taken.value.outcome == "not-executed"
    assert taken.value.reply is not None  # the endpoint's own refusal
    with pytest.raises(TasksError) as foreign:
        await other.update_task(task.taskId, note="not mine")
    assert foreign.value.code is ErrorCode.PERMISSION_DENIED
    assert foreign.value.outcome == "not-executed"
    with pytest.raises(TasksError) as missing:
        await operator.get_task("b-nosuchtask")
    assert missing.value.code is ErrorCode.NOT_FOUND
    assert (await operator.get_task(task.taskId)).binding is not None


async def test_usage_errors_are_refused_before_sending(board: Board) -> None:
    operator = board.client("operator")
    task = await operator.create_task("Shape")
    sent = await spy_requests(board, "update-task")
    cases = [
        operator.update_task(task.taskId, status="open"),  # type: ignore[arg-type]
        operator.invoke("update-task", {"taskId": task.taskId, "colour": "red"}, mode="self"),
        operator.invoke("update-task", {"taskId": task.taskId}),  # targeted, no mode
        operator.invoke("no-such-command", {}),
    ]
    for call in cases:
        with pytest.raises(TasksError) as refused:
            await call
        assert (refused.value.code, refused.value.outcome) == (
            ErrorCode.BAD_REQUEST,
            "not-executed",
        )
        assert refused.value.reply is None
        assert (
            "refused" in refused.value.message
            or "give" in refused.value.message
            or ("no command" in refused.value.message)
        )
    await board.nc.flush()
    assert sent == []


async def test_the_same_envelope_id_applies_once(board: Board) -> None:
    operator = board.client("operator")
    first = await operator.create_task("Once", envelope_id="create-once-1")
    again = await operator.create_task("Once", envelope_id="create-once-1")
    assert again == first
    page = await operator.list_tasks()
    assert [t.taskId for t in page.tasks] == [first.taskId]


async def test_a_timed_out_write_is_resent_with_its_envelope_id(
    board: Board, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first reply is lost on its way back (the client listens on the wrong rail once):
    the client times out, re-sends the same envelope, and the task exists once."""
    operator = board.client("operator", timeout=1.0, retries=1)
    await operator.describe()
    real = subjects.reply_filter
    lost = {"count": 0}

    def lossy(space: str, caller: Any, request_nonce: str) -> str:
        if lost["count"] == 0:
            lost["count"] += 1
            return real(space, caller, "lost-" + request_nonce)
        return real(space, caller, request_nonce)

    monkeypatch.setattr(client_wire, "reply_filter", lossy)
    sent = await spy_requests(board, "create-task")
    task = await operator.create_task("Resent")
    monkeypatch.setattr(client_wire, "reply_filter", real)

    assert lost["count"] == 1
    assert len(sent) == 2
    assert sent[0]["id"] == sent[1]["id"]
    page = await operator.list_tasks()
    assert [t.taskId for t in page.tasks] == [task.taskId]


async def test_iter_tasks_walks_every_page(board: Board) -> None:
    operator = board.client("operator")
    created = {(await operator.create_task(f"Task {n}")).taskId for n in range(12)}
    pages = [page async for page in operator.iter_pages(limit=PAGE_CEILING)]
    assert len(pages) == 3
    assert all(page.appliedLimit == PAGE_CEILING for page in pages)
    assert [page.nextCursor is None for page in pages] == [False, False, True]
    seen = [task.taskId async for task in operator.iter_tasks(limit=PAGE_CEILING)]
    assert len(seen) == len(set(seen)) == 12
    assert set(seen) == created


async def test_watch_board_wakes_on_a_change(board: Board) -> None:
    operator = board.client("operator")
    await operator.describe()  # the event schema is checked once described
    async with operator.watch_board() as events:
        task = await operator.create_task("Watched")
        event = await asyncio.wait_for(anext(events), 10)
    assert isinstance(event, BoardChanged)
    page = await operator.list_tasks()
    assert event.changeSeq == page.changeSeq
    assert [t.taskId for t in page.tasks] == [task.taskId]


async def test_a_restarted_bridge_fences_and_the_client_reissues(tmp_path: Path) -> None:
    """Describe, restart the bridge (a new epoch), claim: the fence refuses the stale bind
    as not executed, and the client describes again and re-issues once."""
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = bridge_config(server.url, tmp_path / "bridge")
        async with TasksClient.connect(
            server.url, SPACE, ENDPOINT, seat=str(seat("worker", 3))
        ) as worker:
            async with bridge_on(config):
                task = await worker.create_task("Across a restart")
                before = worker.resolved
                assert before is not None
            async with bridge_on(config):
                claimed = await worker.claim_task(task.taskId)
            after = worker.resolved
            assert after is not None
            assert after.instance_id == before.instance_id
            assert after.epoch > before.epoch
            assert claimed.status == "claimed"


async def test_connecting_to_nothing_is_unavailable() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(TasksError) as refused:
        async with TasksClient.connect(
            url, SPACE, ENDPOINT, seat=seat("w"), reconnect_time_wait=0.05
        ):
            pass
    assert (refused.value.code, refused.value.outcome) == (ErrorCode.UNAVAILABLE, "not-executed")


async def test_the_client_outlives_a_dropped_connection(board: Board) -> None:
    """The broker connection drops (every attempt to reconnect refused for a while), then
    comes back: the same client serves the next call."""
    host, port = board.url.removeprefix("nats://").split(":")
    proxy = TcpProxy(host, int(port))
    await proxy.start()
    failures: list[Exception] = []

    async def record(exc: Exception) -> None:
        failures.append(exc)

    try:
        async with TasksClient.connect(
            proxy.url, SPACE, ENDPOINT, seat=seat("w"), reconnect_time_wait=0.05, error_cb=record
        ) as tasks:
            task = await tasks.create_task("Across a dropped connection")
            await proxy.cut()
            # More refused reconnects than the attempts connecting is allowed.
            for _ in range(400):
                if len(failures) > CONNECT_ATTEMPTS + 2:
                    break
                await asyncio.sleep(0.02)
            assert len(failures) > CONNECT_ATTEMPTS + 2
            await proxy.mend()
            for _ in range(400):
                if tasks.nc.is_connected:
                    break
                await asyncio.sleep(0.05)
            assert (await tasks.get_task(task.taskId)).title == "Across a dropped connection"
    finally:
        await proxy.stop()
