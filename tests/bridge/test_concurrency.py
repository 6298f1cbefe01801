"""Concurrent writers: one winner, every other claim a conflict, on both backends."""

from __future__ import annotations

import asyncio

from cotal_tasks.bridge.service.commands import Call, CommandService, ServiceSettings
from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import service_over
from tests.conftest import Clock, seat

SEATS = 50


async def claim_race(services: list[CommandService], task_id: str) -> tuple[int, int]:
    async def claim(n: int) -> str:
        service = services[n % len(services)]
        call = Call("claim-task", seat(f"s{n}", n), f"claim{n}", {"taskId": task_id}, mode="self")
        try:
            await service.handle(call)
        except ContractError as exc:
            return exc.code.value
        return "ok"

    results = await asyncio.gather(*(claim(n) for n in range(SEATS)))
    return results.count("ok"), results.count(ErrorCode.CONFLICT.value)


async def create(service: CommandService) -> str:
    call = Call("create-task", seat("operator", 99), "create-1", {"title": "contested"})
    task_id: str = (await service.handle(call))["taskId"]
    return task_id


async def test_fifty_concurrent_claims_have_one_winner(store: TaskStore, clock: Clock) -> None:
    service = service_over(store, ServiceSettings(space="demo"), clock)
    task_id = await create(service)
    before = await store.change_seq()
    winners, conflicts = await claim_race([service], task_id)
    assert (winners, conflicts) == (1, SEATS - 1)
    assert await store.change_seq() == before + 1
    assert (await store.get(task_id)).task.status == "claimed"


async def test_two_instances_on_one_postgresql_have_one_winner(
    postgres_database: str, clock: Clock
) -> None:
    first = await BoardStore.open(postgres_database)
    second = await BoardStore.open(postgres_database)
    try:
        services = [
            service_over(store, ServiceSettings(space="demo"), clock) for store in (first, second)
        ]
        task_id = await create(services[0])
        winners, conflicts = await claim_race(services, task_id)
        assert (winners, conflicts) == (1, SEATS - 1)
        stored = await second.get(task_id)
        assert stored.task.binding is not None
        assert stored.revision == 2
        assert await first.change_seq() == 2
    finally:
        await first.close()
        await second.close()
