"""Instances over the real wire: identity across restarts, and two instances in one queue
group on one PostgreSQL board. Stopping one is in ``test_wire_instances_stop.py``."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from cotal_tasks.bridge.wiring.process import running_bridge
from tests.bridge.instances_support import BIND_REFUSED, Incarnation, all_tasks, answered
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, bridge_config, broker, client, set_up_space
from tests.support.cotal import TestCaller

# -- (a) identity across restarts -------------------------------------------------------------


async def test_a_restart_keeps_the_instance_id_advances_the_epoch_and_expires_old_binds(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path) as server:
        await set_up_space(server.url)
        config = bridge_config(server.url, tmp_path / "bridge")
        nc = await client(server.url)
        try:
            caller = TestCaller(nc, SPACE, ENDPOINT, seat("restarter", 1))
            seen: list[Incarnation] = []
            first_task: str | None = None
            for run in range(3):
                async with running_bridge(config) as bridge:
                    served = Incarnation.of(bridge)
                    previous = seen[-1] if seen else None
                    if previous is not None:
                        # A bind to the previous incarnation, as a caller still holding it sends.
                        before = await all_tasks(caller)
                        stale = await answered(
                            caller, "create-task", {"title": "stale bind"}, bind=previous
                        )
                        assert stale.responder == served
                        error = stale.reply["error"]
                        assert stale.reply["ok"] is False
                        assert (error["code"], error["outcome"]) == ("expired", "not-executed")
                        assert error["details"] == [
                            {
                                "kind": BIND_REFUSED,
                                "endpoint": ENDPOINT,
                                "command": "create-task",
                                "boundTo": previous.bind(),
                                "servedBy": served.bind(),
                            }
                        ]
                        assert await all_tasks(caller) == before

                    described = Incarnation.described(await caller.describe())
                    assert described == served
                    if previous is not None:
                        assert described.instance_id == previous.instance_id
                        assert described.epoch == previous.epoch + 1
                    seen.append(described)

                    made = await answered(
                        caller, "create-task", {"title": f"run {run}"}, bind=described
                    )
                    assert made.responder == described
                    if first_task is None:
                        first_task = made.data["taskId"]
                    # What the first incarnation acknowledged is still there.
                    got = await answered(caller, "get-task", {"taskId": first_task})
                    assert got.data["title"] == "run 0"
        finally:
            await nc.close()
    assert [s.epoch for s in seen] == [1, 2, 3]
    assert len({s.instance_id for s in seen}) == 1


# -- (b) two instances, one queue group, one board --------------------------------------------


@pytest.mark.postgres
async def test_two_instances_share_the_class_rail_and_the_board(
    tmp_path: Path, postgres_database: str
) -> None:
    callers_n, per_caller = 4, 15
    async with broker(tmp_path) as server, AsyncExitStack() as stack:
        await set_up_space(server.url)
        a = await stack.enter_async_context(
            running_bridge(bridge_config(server.url, tmp_path / "a", postgres_database))
        )
        b = await stack.enter_async_context(
            running_bridge(bridge_config(server.url, tmp_path / "b", postgres_database))
        )
        instances = {Incarnation.of(a), Incarnation.of(b)}
        assert len({i.instance_id for i in instances}) == 2
        nc = await client(server.url)
        stack.push_async_callback(nc.close)
        callers = [TestCaller(nc, SPACE, ENDPOINT, seat(f"writer{i}", i)) for i in range(callers_n)]
        for c in callers:
            await c.describe()

        answers = await asyncio.gather(
            *(
                answered(c, "create-task", {"title": f"{c.seat.actor} #{j}"})
                for c in callers
                for j in range(per_caller)
            )
        )

        assert len(answers) == callers_n * per_caller
        assert {x.responder for x in answers} == instances
        made = {x.data["taskId"]: x.data["title"] for x in answers}
        assert len(made) == len(answers)
        # Each instance reads every acknowledged task, whichever instance wrote it.
        reader = callers[0]
        for instance in instances:
            change_seq, tasks = await all_tasks(reader, via=instance)
            assert {t["taskId"]: t["title"] for t in tasks} == made
            assert change_seq == len(made)
            for task_id, title in made.items():
                got = await answered(
                    reader,
                    "get-task",
                    {"taskId": task_id},
                    bind=instance,
                    via=instance.instance_id,
                )
                assert got.responder == instance
                assert got.data["title"] == title
