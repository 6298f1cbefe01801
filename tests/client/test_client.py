"""The typed client against a real bridge on a real nats-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg

from cotal_tasks.bridge.process.broker import free_port
from cotal_tasks.client import (
    BoardChanged,
    ErrorCode,
    EvidenceInput,
    Task,
    TaskPage,
    TasksClient,
    TasksError,
)
from cotal_tasks.client.client import CONNECT_ATTEMPTS
from cotal_tasks.client.subjects import CallerRail
from tests.client.conftest import PAGE_CEILING, Board
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, bridge_on, broker, set_up_space
from tests.support.cotal import Space
from tests.support.polling import eventually
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
        operator.create_task("Shape", envelope_id="has spaces"),
    ]
    for call in cases:
        with pytest.raises(TasksError) as refused:
            await call
        assert (refused.value.code, refused.value.outcome) == (
            ErrorCode.BAD_REQUEST,
            "not-executed",
        )
        assert refused.value.reply is None
        assert any(
            word in refused.value.message.lower()
            for word in ("refused", "give", "no command", "choose")
        ), refused.value.message
    await board.nc.flush()
    assert sent == []


async def test_a_misspelt_call_option_is_refused_not_dropped(board: Board) -> None:
    """A dropped ``envelope_id`` would send a fresh id, and a retried write would apply
    twice: an option the call does not take is a TypeError before anything is sent."""
    operator = board.client("operator")
    sent = await spy_requests(board, "create-task")
    options: dict[str, Any] = {"envelope_Id": "create-once-2"}
    with pytest.raises(TypeError, match="envelope_Id"):
        await operator.invoke("create-task", {"title": "Once"}, **options)
    with pytest.raises(TypeError, match="envelope_Id"):
        await operator.invoke_answer("create-task", {"title": "Once"}, **options)
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
    real = CallerRail.reply_filter
    lost = {"count": 0}

    def lossy(rail: CallerRail, request_nonce: str) -> str:
        if lost["count"] == 0:
            lost["count"] += 1
            return real(rail, "lost-" + request_nonce)
        return real(rail, request_nonce)

    monkeypatch.setattr(CallerRail, "reply_filter", lossy)
    sent = await spy_requests(board, "create-task")
    task = await operator.create_task("Resent")
    monkeypatch.undo()

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
            await eventually(
                lambda: len(failures) > CONNECT_ATTEMPTS + 2, 8, what="refused reconnects"
            )
            await proxy.mend()
            await eventually(lambda: tasks.nc.is_connected, 20, what="reconnected")
            assert (await tasks.get_task(task.taskId)).title == "Across a dropped connection"
    finally:
        await proxy.stop()


async def test_the_versioned_rail(board: Board) -> None:
    """With a generation the client speaks ``ep.v1``: its requests and replies carry the
    generation between the caller triple and the nonce."""
    generation = "0123456789abcdef" * 2
    worker = board.client("worker", generation=generation)
    seen: list[str] = []

    async def record(msg: Msg) -> None:
        seen.append(msg.subject)

    await board.nc.subscribe(f"cotal.{SPACE}.ep.>", cb=record)
    await board.nc.flush()
    service = await worker.describe()
    assert service.descriptor["endpoint"] == ENDPOINT
    assert service.document["urn"] == "ai.cotal.tasks"
    task = await worker.create_task("Versioned")
    claimed = await worker.claim_task(task.taskId)
    assert claimed.binding is not None
    await board.nc.flush()
    assert seen
    assert all(s.startswith(f"cotal.{SPACE}.ep.v1.") for s in seen), seen
    assert all(f".{generation}." in s for s in seen), seen
    with pytest.raises(TasksError) as bad:
        board.client("worker", generation="not-hex")
    assert bad.value.code is ErrorCode.BAD_REQUEST


async def test_describe_finds_an_endpoint_that_starts_late(tmp_path: Path) -> None:
    """Nothing serves: describe keeps asking until its deadline and says unavailable.
    An instance that comes up while it asks is found."""
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        async with TasksClient.connect(server.url, SPACE, ENDPOINT, seat=seat("w")) as tasks:
            with pytest.raises(TasksError) as nobody:
                await tasks.describe(timeout=1.0)
            assert (nobody.value.code, nobody.value.outcome) == (
                ErrorCode.UNAVAILABLE,
                "not-executed",
            )

            asked = asyncio.Event()
            count = 0

            async def spy(msg: Msg) -> None:
                nonlocal count
                count += 1
                if count >= 2:
                    asked.set()

            await tasks.nc.subscribe(f"cotal.{SPACE}.ep.one.*.describe.>", cb=spy)
            describing = asyncio.create_task(tasks.describe(timeout=60))
            await asyncio.wait_for(asked.wait(), 30)  # asked twice, nobody answered
            assert not describing.done()
            async with bridge_on(bridge_config(server.url, tmp_path / "bridge")):
                service = await describing
            assert service.endpoint == ENDPOINT


async def test_bind_and_administer(board: Board) -> None:
    operator = board.client("operator")
    worker, other = board.seat("worker", 8), board.seat("other", 9)
    space = Space(board.nc.jetstream(), SPACE)
    for seat_ in (worker, other):
        await space.spawn(seat_)  # a live lifecycle to bind to
    task = await operator.create_task("Assigned")

    bound = await operator.bind_task(task.taskId, worker, expected_binding=None)
    assert bound.binding is not None
    assert bound.binding.ref().model_dump() == {
        "owner": worker.owner,
        "actor": worker.actor,
        "lifecycleUid": worker.lifecycleUid,
    }
    assert bound.binding.boundBy == "local.operator"
    # The expected binding no longer holds: refused, nothing changes.
    with pytest.raises(TasksError) as stale:
        await operator.bind_task(task.taskId, str(other), expected_binding=None)
    assert (stale.value.code, stale.value.outcome) == (ErrorCode.CONFLICT, "not-executed")
    again = await operator.bind_task(task.taskId, worker, expected_binding=worker)
    assert again == bound

    freed = await operator.administer_task(task.taskId, unbind=True, note="Seat is gone.")
    assert (freed.status, freed.binding) == ("open", None)


async def test_a_watch_started_by_hand_ends_when_stopped(board: Board) -> None:
    operator = board.client("operator")
    watch = await operator.watch_board().start()
    await operator.create_task("Seen")
    event = await asyncio.wait_for(anext(watch), 10)
    assert event.changeSeq >= 1
    await watch.stop()
    assert [e async for e in watch] == []
