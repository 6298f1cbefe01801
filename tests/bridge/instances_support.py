"""What the instance tests share: callers that write their own subjects and envelopes
(``request_subject``/``call``, on top of ``TestCaller.envelope`` for the contract digests)
and read the responding instance and epoch from the reply subject, as a Cotal caller does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cotal_tasks.bridge.wiring.process import Bridge
from tests.support.bridge import ENDPOINT, SPACE
from tests.support.cotal import Bound, TestCaller, nonce
from tests.support.paging import follow_cursor, tasks_of

Json = dict[str, Any]

PREFIX = f"cotal.{SPACE}"
TOKEN = ENDPOINT.replace(".", "_")
BIND_REFUSED = "ai.cotal.ep.bind-refused"


@dataclass(frozen=True)
class Incarnation:
    instance_id: str
    epoch: int

    @classmethod
    def of(cls, bridge: Bridge) -> Incarnation:
        identity = bridge.servers[0].identity
        return cls(identity.instance_id, identity.epoch)

    @classmethod
    def described(cls, bound: Bound) -> Incarnation:
        return cls(bound.instance_id, bound.epoch)

    def bind(self) -> Json:
        return {"instanceId": self.instance_id, "epoch": self.epoch}


@dataclass(frozen=True)
class Answer:
    """A reply and the incarnation that sent it (read from the reply subject)."""

    responder: Incarnation
    reply: Json

    @property
    def data(self) -> Any:
        assert self.reply["ok"] is True, self.reply
        return self.reply.get("data")


def request_subject(
    caller: TestCaller, command: str, request_nonce: str, via: str | None = None
) -> str:
    """An untargeted request on the class rail, or on ``via``'s own inst rail."""
    s = caller.seat
    route = f"one.{TOKEN}" if via is None else f"inst.{TOKEN}.{via}"
    return f"{PREFIX}.ep.{route}.{command}.{s.owner}.{s.actor}.{s.lifecycleUid}.{request_nonce}"


async def call(
    caller: TestCaller,
    command: str,
    args: Json,
    *,
    request_id: str | None = None,
    bind: Incarnation | None = None,
    via: str | None = None,
    wait: float = 5.0,
) -> Answer | None:
    """One untargeted call; ``None`` when nothing answered within ``wait`` seconds."""
    assert caller.bound is not None, "describe first: the digests come from the contract"
    request_nonce = nonce()
    body = caller.envelope(command, args=args, request_id=request_id, bind=False)
    if bind is not None:
        body["bind"] = bind.bind()
    got = await caller.exchange(
        request_subject(caller, command, request_nonce, via),
        json.dumps(body).encode(),
        request_nonce,
        wait=wait,
    )
    if got is None:
        return None
    msg, reply = got
    tokens = msg.subject.split(".")
    assert tokens[:5] == ["cotal", SPACE, "ep", "reply", TOKEN], msg.subject
    assert reply["id"] == body["id"], reply
    return Answer(Incarnation(tokens[5], int(tokens[6])), reply)


async def answered(caller: TestCaller, command: str, args: Json, **kw: Any) -> Answer:
    answer = await call(caller, command, args, **kw)
    assert answer is not None, f"{command} was not answered"
    return answer


async def all_tasks(reader: TestCaller, via: Incarnation | None = None) -> tuple[int, list[Json]]:
    """(changeSeq, every task summary), read through one instance when ``via`` is given."""

    async def fetch(args: Json) -> Json:
        answer = await answered(
            reader, "list-tasks", args, bind=via, via=None if via is None else via.instance_id
        )
        if via is not None:
            assert answer.responder == via
        page: Json = answer.data
        return page

    pages = await follow_cursor(fetch, {"limit": 100})
    return pages[0]["changeSeq"], tasks_of(pages)
