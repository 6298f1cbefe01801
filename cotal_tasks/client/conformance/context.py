"""What every conformance check stands on: the cast of caller seats, their clients, the
space staging a check may need, and the verdict exceptions.

A check plays several seats (an operator, a worker, another seat, a new incarnation of
the worker). On an open broker the runner invents them, fresh for every check, so no
check sees what another left. On a broker with credentials each role is given
(``--seat ROLE=OWNER.ACTOR/UID`` and ``--creds ROLE=FILE``); a check needing a role
nobody gave is skipped and says which. Some checks need the space to know a seat (its
lifecycle head, its presence card): the runner writes those for its own seats when
staging is on (an open broker, or a credential that may write the space's records).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from cotal_tasks.client.client import TasksClient
from cotal_tasks.client.errors import TasksError
from cotal_tasks.client.wire import Answer
from cotal_tasks.core import Seat, space_token
from cotal_tasks.core.commands import Mode

Json = dict[str, Any]
# The role a check asks for, and the credential role that plays it on a broker with
# credentials: seats of the same principal class share one given seat.
ROLE_OF: dict[str, str] = {
    "reader": "operator",
    "operator": "operator",
    "worker": "seat",
    "me": "seat",
    "holder": "seat",
    "w": "seat",
    "target": "seat",
    "versioned": "seat",
    "other": "other",
    "late": "other",
    "intruder": "other",
    "successor": "successor",
    "self-only": "self-only",
}


class Failed(Exception):
    """The endpoint did something the contract forbids; the text says what was seen."""


class Skipped(Exception):
    """The check cannot run here; the text says what it needs."""


def ensure(condition: bool, seen: str) -> None:
    """Fail the check with ``seen`` unless ``condition`` holds."""
    if not condition:
        raise Failed(seen)


@dataclass
class Hooks:
    """What an operator's hand provides, when the runner is given it.

    ``spoil_store`` makes the endpoint's store unreadable (check 3); ``store_unreadable``
    says the operator already did, so check 3 only reads.
    """

    spoil_store: Callable[[], Awaitable[None]] | None = None
    store_unreadable: bool = False


@dataclass
class Actor:
    seat: Seat
    nc: NATS


@dataclass
class Context:
    """One run's connection, endpoint and seats."""

    nc: NATS
    space: str
    endpoint: str
    given: Mapping[str, Actor] = field(default_factory=dict)
    invent: bool = True  # an open broker: roles nobody gave are invented per check
    stage: bool = True  # write lifecycle heads and presence cards for the runner's seats
    owner: str = "local"
    hooks: Hooks = field(default_factory=Hooks)
    timeout: float = 10.0
    name_seat: Callable[[str, int], Seat] | None = None  # how invented seats are named
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    memo: dict[str, Any] = field(default_factory=dict)
    _check: str = "00"
    _clients: dict[Seat, TasksClient] = field(default_factory=dict)
    _invented: dict[tuple[str, str, int], Actor] = field(default_factory=dict)

    @property
    def token(self) -> str:
        return self.endpoint.replace(".", "_")

    @property
    def prefix(self) -> str:
        return f"cotal.{space_token(self.space)}"

    def begin(self, check: str) -> None:
        self._check = check

    def actor(self, role: str, incarnation: int = 1) -> Actor:
        """The seat playing ``role`` (a new lifecycle uid for each ``incarnation``)."""
        cast = "successor" if incarnation == 2 else ROLE_OF.get(role, role)
        given = self.given.get(role) or self.given.get(cast)
        if given is not None and (incarnation == 1 or cast == "successor"):
            return given
        if not self.invent:
            raise Skipped(f"needs a seat for role {cast!r}: give --seat and --creds for it")
        key = (self._check, role, incarnation)
        if key not in self._invented:
            if self.name_seat is not None:
                seat = self.name_seat(role, incarnation)
            else:
                actor = f"{role.replace('-', '_')}_{self.run_id}_{self._check}"
                seat = Seat(self.owner, actor, f"{incarnation:02d}{secrets.token_hex(12)}")
            self._invented[key] = Actor(seat, self.nc)
        return self._invented[key]

    def seat(self, role: str, incarnation: int = 1) -> Seat:
        return self.actor(role, incarnation).seat

    def client(self, who: Actor | str) -> TasksClient:
        actor = self.actor(who) if isinstance(who, str) else who
        found = self._clients.get(actor.seat)
        if found is None:
            found = TasksClient(
                actor.nc, self.space, self.endpoint, actor.seat, name="conformance",
                timeout=self.timeout,
            )  # fmt: skip
            self._clients[actor.seat] = found
        return found

    # -- calls, as reply envelopes ---------------------------------------------------------
    async def call(
        self,
        who: Actor | str,
        command: str,
        args: Json | None = None,
        *,
        mode: Mode | None = None,
        target: Seat | None = None,
        envelope_id: str | None = None,
    ) -> Json:
        """The reply envelope of ``command`` (args sent as given, even if the schema refuses)."""
        client = self.client(who)
        try:
            answer: Answer = await client.invoke_answer(
                command, args or {}, mode=mode, target=target, envelope_id=envelope_id,
                check_args=False,
            )  # fmt: skip
        except TasksError as exc:
            raise Failed(
                f"{command} failed in the client: {exc.code.value}: {exc.message}"
            ) from exc
        return answer.reply

    async def ok(self, who: Actor | str, command: str, args: Json | None = None, **kw: Any) -> Any:
        reply = await self.call(who, command, args, **kw)
        if not reply.get("ok"):
            error = reply.get("error", {})
            raise Failed(f"{command} was refused: {error.get('code')}: {error.get('message')}")
        return reply.get("data")

    async def refused(
        self, who: Actor | str, command: str, args: Json | None = None, **kw: Any
    ) -> tuple[str, str | None]:
        """The (code, outcome) of a call that must be refused."""
        reply = await self.call(who, command, args, **kw)
        ensure(reply.get("ok") is False, f"{command} {json.dumps(args)} succeeded; it must not")
        ensure("data" not in reply, f"the {command} refusal carries data")
        error = reply.get("error")
        ensure(isinstance(error, dict), f"the {command} refusal has no error object")
        assert isinstance(error, dict)
        return str(error.get("code")), error.get("outcome")

    # -- the space, staged -----------------------------------------------------------------
    async def spawn(self, seat: Seat, environment: str | None = None) -> None:
        """Make ``seat`` the current lifecycle of its principal, with a fresh presence card."""
        if not self.stage:
            raise Skipped(
                "needs the space to know the runner's seats (a lifecycle head, a presence "
                "card); run with --stage-space where the runner may write them"
            )
        js = self.nc.jetstream()
        token = space_token(self.space)
        head = {
            "owner": seat.owner,
            "actor": seat.actor,
            "lifecycleUid": seat.lifecycleUid,
            "managerInstance": "conformance",
            "processEpoch": 1,
            "state": "active",
        }
        records = await js.key_value(f"cotal_records_{token}")
        await records.put(f"lifecycle.{seat.owner}.{seat.actor}", json.dumps(head).encode())
        card: Json = {
            "card": {"id": seat.principal, "name": seat.actor, "kind": "agent"},
            "lifecycleUid": seat.lifecycleUid,
            "status": "working",
            "ts": int(time.time() * 1000),
        }
        if environment is not None:
            card["environment"] = environment
        presence = await js.key_value(f"cotal_presence_{token}")
        await presence.put(seat.principal, json.dumps(card).encode())


# -- small readers the checks share -----------------------------------------------------------


def triple(seat: Seat) -> Json:
    return {"owner": seat.owner, "actor": seat.actor, "lifecycleUid": seat.lifecycleUid}


def binding_triple(record: Json) -> Json | None:
    b = record.get("binding")
    if not isinstance(b, dict):
        return None
    return {"owner": b.get("owner"), "actor": b.get("actor"), "lifecycleUid": b.get("lifecycleUid")}


async def create(ctx: Context, who: str, title: str, **fields: Any) -> Json:
    data: Json = await ctx.ok(who, "create-task", {"title": title, **fields})
    ensure(data.get("status") == fields.get("status", "open"), f"create-task answered {data}")
    ensure("binding" not in data, f"a created task carries a binding: {data}")
    return data


async def claim(ctx: Context, who: Actor | str, task_id: str) -> Json:
    data: Json = await ctx.ok(who, "claim-task", {"taskId": task_id}, mode="self")
    return data


async def get(ctx: Context, task_id: str) -> Json:
    data: Json = await ctx.ok("reader", "get-task", {"taskId": task_id})
    return data


async def page(ctx: Context, **args: Any) -> Json:
    data: Json = await ctx.ok("reader", "list-tasks", args)
    return data


async def my_ids(ctx: Context, who: Actor | str) -> list[str]:
    data: Json = await ctx.ok(who, "my-tasks", {}, mode="self")
    ensure("appliedLimit" in data, f"my-tasks has no appliedLimit: {data}")
    ids = [t["taskId"] for t in data["tasks"]]
    cursor = data.get("nextCursor")
    while cursor:
        more: Json = await ctx.ok(who, "my-tasks", {"cursor": cursor}, mode="self")
        ids += [t["taskId"] for t in more["tasks"]]
        cursor = more.get("nextCursor")
    return ids
