"""Helpers for the command-service tests.

``Client`` is a thin caller over ``CommandService.handle``: every call gets a fresh
envelope id unless one is pinned, exactly as a real client would send a new nonce.
``DictPresence`` is an in-memory ``PresenceSource`` (the presence port). ``seed_board``
fills a real board's own tables in bulk for the 10,000-task paging tests.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import create_async_engine

from cotal_tasks.bridge.service.commands import (
    Call,
    CommandService,
    NoPresence,
    PresenceSource,
    SeatPresence,
    ServiceSettings,
)
from cotal_tasks.core import (
    ContractError,
    CreateTaskInput,
    ErrorCode,
    Mode,
    Seat,
    Task,
    UpdateTaskInput,
    claim_task,
    create_task,
    update_task,
)
from cotal_tasks.providers.board import BoardStore, normalize_url, tables
from cotal_tasks.providers.store import TaskStore
from tests.conftest import Clock, seat
from tests.support.paging import follow_cursor

ALICE = seat("alice", 1)
BOB = seat("bob", 2)
ALICE_REBORN = seat("alice", 3)  # same principal local.alice, a new lifecycle uid
PAGE_KEYS = {"tasks", "appliedLimit", "observedAt", "changeSeq"}  # a list page's keys

Json = dict[str, Any]

OPERATOR = seat("operator", 99)


class DictPresence:
    """A ``PresenceSource`` over a dict keyed by ``(owner, actor)``."""

    def __init__(self) -> None:
        self.cards: dict[tuple[str, str], SeatPresence] = {}
        self.lookups: list[tuple[str, str]] = []

    def put(
        self,
        who: Seat,
        *,
        environment: str | None,
        fresh: bool = True,
        lifecycle_uid: str | None = None,
    ) -> None:
        """Publish a card for ``who``; ``lifecycle_uid`` overrides the seat's own uid."""
        uid = who.lifecycleUid if lifecycle_uid is None else lifecycle_uid
        self.cards[(who.owner, who.actor)] = SeatPresence(uid, environment, fresh)

    async def lookup(self, owner: str, actor: str) -> SeatPresence | None:
        self.lookups.append((owner, actor))
        return self.cards.get((owner, actor))


class CallOptions(TypedDict, total=False):
    """How a call is addressed beyond its command, caller and args (``Client.call``)."""

    mode: Mode | None
    target: Seat | None
    envelope_id: str | None


def service_over(
    store: TaskStore,
    settings: ServiceSettings,
    clock: Clock,
    presence: PresenceSource | None = None,
) -> CommandService:
    """The service the composition root makes over ``store``: a board's build declares its
    fast JSON reads, which the service then uses (the in-memory store has none)."""
    return CommandService(
        store,
        settings,
        clock,
        presence or NoPresence(),
        json_reads=store if isinstance(store, BoardStore) else None,
    )


class Client:
    """Calls a ``CommandService`` the way an authenticated transport would."""

    def __init__(self, service: CommandService, store: TaskStore) -> None:
        self.service = service
        self.store = store
        self._ids = itertools.count(1)

    @classmethod
    def over(
        cls,
        store: TaskStore,
        clock: Clock,
        *,
        presence: PresenceSource | None = None,
        **settings: Any,
    ) -> Client:
        """A client of a fresh service over ``store`` in space ``demo``; ``settings``
        override the other service settings."""
        service_settings = ServiceSettings(space="demo", **settings)
        return cls(service_over(store, service_settings, clock, presence or NoPresence()), store)

    def fresh_id(self) -> str:
        return f"env-{next(self._ids):06d}"

    async def call(
        self,
        command: str,
        caller: Seat,
        args: Mapping[str, Any] | None = None,
        *,
        mode: Mode | None = None,
        target: Seat | None = None,
        envelope_id: str | None = None,
    ) -> Json:
        call = Call(
            command=command,
            caller=caller,
            envelope_id=self.fresh_id() if envelope_id is None else envelope_id,
            args=args,
            mode=mode,
            target=target,
        )
        return await self.service.handle(call)

    async def refused(
        self,
        code: ErrorCode,
        command: str,
        caller: Seat,
        args: Mapping[str, Any] | None = None,
        **options: Unpack[CallOptions],
    ) -> ContractError:
        """Make the call, expect a refusal with ``code`` before any effect, return it."""
        with pytest.raises(ContractError) as caught:
            await self.call(command, caller, args, **options)
        error = caught.value
        assert error.code is code, error.message
        assert error.outcome == "not-executed"
        return error

    async def create(self, title: str = "a task", **fields: Any) -> Json:
        return await self.call("create-task", OPERATOR, {"title": title, **fields})

    async def get(self, task_id: str) -> Json:
        return await self.call("get-task", OPERATOR, {"taskId": task_id})

    async def claim(self, who: Seat, task_id: str) -> Json:
        return await self.call("claim-task", who, {"taskId": task_id}, mode="self")

    async def update(self, who: Seat, task_id: str, **fields: Any) -> Json:
        return await self.call("update-task", who, {"taskId": task_id, **fields}, mode="self")

    async def bind(
        self, target: Seat, task_id: str, *, mode: Mode = "any", caller: Seat = OPERATOR
    ) -> Json:
        return await self.call("bind-task", caller, {"taskId": task_id}, mode=mode, target=target)

    async def administer(self, task_id: str, **fields: Any) -> Json:
        return await self.call("administer-task", OPERATOR, {"taskId": task_id, **fields})

    async def refused_claim(self, code: ErrorCode, who: Seat, task_id: str) -> ContractError:
        """``claim`` refused with ``code`` (see ``refused``)."""
        return await self.refused(code, "claim-task", who, {"taskId": task_id}, mode="self")

    async def refused_update(
        self, code: ErrorCode, who: Seat, task_id: str, **fields: Any
    ) -> ContractError:
        """``update`` refused with ``code`` (see ``refused``)."""
        args = {"taskId": task_id, **fields}
        return await self.refused(code, "update-task", who, args, mode="self")

    async def refused_bind(
        self,
        code: ErrorCode,
        target: Seat,
        task_id: str,
        *,
        mode: Mode = "any",
        caller: Seat = OPERATOR,
        **fields: Any,
    ) -> ContractError:
        """``bind`` refused with ``code``; ``fields`` add to the args (``expectedBinding``)."""
        args = {"taskId": task_id, **fields}
        return await self.refused(code, "bind-task", caller, args, mode=mode, target=target)

    async def refused_administer(
        self, code: ErrorCode, task_id: str, **fields: Any
    ) -> ContractError:
        """``administer`` refused with ``code`` (see ``refused``)."""
        return await self.refused(code, "administer-task", OPERATOR, {"taskId": task_id, **fields})

    async def list_tasks(self, **args: Any) -> Json:
        return await self.call("list-tasks", OPERATOR, args)

    async def my_tasks(self, who: Seat, **args: Any) -> Json:
        return await self.call("my-tasks", who, args, mode="self")

    async def change_seq(self) -> int:
        return await self.store.change_seq()

    async def page_all(
        self, command: str, caller: Seat, args: Mapping[str, Any], *, mode: Mode | None = None
    ) -> list[Json]:
        """Follow ``nextCursor`` to the end; return every page."""
        return await follow_cursor(
            lambda page_args: self.call(command, caller, page_args, mode=mode), args
        )


async def seed_board(url: str, tasks: Sequence[Task]) -> None:
    """Insert ``tasks`` into the board at ``url`` in bulk, in order.

    Committing one task at a time measured about 3.2 ms a task (``BoardStore.commit``)
    and 5 ms (``create-task``) on both backends, so 10,000 would take 30 to 50 s per
    backend. This writes the same columns ``BoardStore._commit`` writes (the record
    and its summary as compact JSON, the status and the bound triple for the filters)
    in a few statements; it does not advance ``changeSeq`` or write history.
    """
    rows = []
    for task in tasks:
        binding = task.binding
        rows.append(
            {
                "task_id": task.taskId,
                "status": task.status,
                "bound_owner": binding.owner if binding else None,
                "bound_actor": binding.actor if binding else None,
                "bound_uid": binding.lifecycleUid if binding else None,
                "revision": 1,
                "body": _compact(task.to_json()),
                "summary": _compact(task.summary().to_json()),
                "created_at": task.createdAt,
                "updated_at": task.updatedAt,
            }
        )
    engine = create_async_engine(normalize_url(url))
    try:
        async with engine.begin() as conn:
            for start in range(0, len(rows), 2000):
                await conn.execute(insert(tables.tasks), rows[start : start + 2000])
    finally:
        await engine.dispose()


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def triple(who: Seat) -> dict[str, str]:
    return {"owner": who.owner, "actor": who.actor, "lifecycleUid": who.lifecycleUid}


def bound_triple(task: Json) -> dict[str, str]:
    binding = task["binding"]
    return {key: binding[key] for key in ("owner", "actor", "lifecycleUid")}


def mixed_board(count: int, *, space: str, claimer: Seat, blocker: Seat) -> list[Task]:
    """``count`` tasks: 60% open, 10% done, 10% dropped, 10% claimed by ``claimer``,
    10% blocked by ``blocker``; ids ``t-00000`` on, in creation order."""
    tasks: list[Task] = []
    for n in range(count):
        now = 1_700_000_000_000 + n
        kind = n % 10
        status = {6: "done", 7: "dropped"}.get(kind, "open")
        task = create_task(
            CreateTaskInput.model_validate({"title": f"task {n}", "status": status}),
            task_id=f"t-{n:05d}",
            space=space,
            now=now,
        )
        if kind in (8, 9):
            task = claim_task(task, claimer if kind == 8 else blocker, environment=None, now=now)
        if kind == 9:
            blocked = UpdateTaskInput(taskId=task.taskId, status="blocked")
            task = update_task(task, blocker, blocked, now=now)
        tasks.append(task)
    return tasks
