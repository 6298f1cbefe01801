"""What the client refuses to believe, against a scripted endpoint on a real nats-server.

The endpoint here is the test's own: it publishes the real contract to ``EPC_<space>``,
answers ``describe`` truthfully, and answers commands with whatever each test scripts, so
every check the client makes (artifact digests, reply attribution, the request id, the
output schema, the bind refusal) meets a reply that fails it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from cotal_tasks.bridge.wire.space import ensure_space, publish_artifacts
from cotal_tasks.client import ErrorCode, TasksClient, TasksError
from cotal_tasks.core import COMMANDS, contract_artifacts
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE, broker, client

TOKEN = ENDPOINT.replace(".", "_")
INSTANCE = "a" * 26
TASK = {
    "version": "ai.cotal.tasks.task/v1",
    "taskId": "t-1",
    "space": SPACE,
    "title": "Scripted",
    "status": "open",
    "evidence": [],
    "createdAt": 1,
    "updatedAt": 1,
}
Json = dict[str, Any]
# (request envelope, reply subject) -> (reply subject, reply body)
Script = Callable[[Json, str], tuple[str, Json]]


def ok(request: Json, data: Any) -> Json:
    return {"v": 1, "id": request["id"], "ok": True, "data": data}


def answer_as(subject: str, instance: str = INSTANCE, epoch: int = 1) -> str:
    tokens = subject.split(".")
    tokens[5], tokens[6] = instance, str(epoch)
    return ".".join(tokens)


@dataclass
class Endpoint:
    nc: NATS
    script: Script
    digest: str = ""

    async def start(self) -> None:
        await self.nc.subscribe(f"cotal.{SPACE}.ep.one.{TOKEN}.>", cb=self._answer)
        await self.nc.flush()

    async def _answer(self, msg: Msg) -> None:
        tokens = msg.subject.split(".")
        command, (owner, actor, uid, nonce) = tokens[5], tokens[-4:]
        reply = f"cotal.{SPACE}.ep.reply.{TOKEN}.{INSTANCE}.1.{owner}.{actor}.{uid}.{nonce}"
        request = json.loads(msg.data)
        if command == "describe":
            cluster = {"digest": self.digest, "commands": list(COMMANDS)}
            descriptor = {"endpoint": ENDPOINT, "owner": "local", "clusters": [cluster]}
            body = ok(request, {"public": True, "descriptor": descriptor})
        else:
            reply, body = self.script(request, reply)
        await self.nc.publish(reply, json.dumps(body).encode())


@pytest.fixture
async def space(tmp_path: Path) -> AsyncIterator[NATS]:
    async with broker(tmp_path) as server:
        nc = await client(server.url)
        await ensure_space(nc.jetstream(), SPACE)
        await publish_artifacts(nc.jetstream(), SPACE, contract_artifacts().all())
        try:
            yield nc
        finally:
            await nc.close()


async def scripted(nc: NATS, script: Script, digest: str | None = None) -> TasksClient:
    endpoint = Endpoint(nc, script, digest or contract_artifacts().cluster.digest)
    await endpoint.start()
    return TasksClient(nc, SPACE, ENDPOINT, seat("caller"), timeout=2.0, retries=0)


async def refused(tasks: TasksClient) -> TasksError:
    with pytest.raises(TasksError) as caught:
        await tasks.get_task("t-1")
    return caught.value


async def test_an_honest_reply_is_accepted(space: NATS) -> None:
    tasks = await scripted(space, lambda request, reply: (reply, ok(request, TASK)))
    assert (await tasks.get_task("t-1")).title == "Scripted"


async def test_a_reply_not_echoing_the_request_id_is_refused(space: NATS) -> None:
    tasks = await scripted(space, lambda request, reply: (reply, {**ok(request, TASK), "id": "x"}))
    error = await refused(tasks)
    assert (error.code, error.outcome) == (ErrorCode.INTERNAL, "unknown")
    assert "echo the request id" in error.message


async def test_a_result_outside_the_output_schema_is_refused(space: NATS) -> None:
    tasks = await scripted(
        space, lambda request, reply: (reply, ok(request, {**TASK, "status": "lost"}))
    )
    error = await refused(tasks)
    assert (error.code, error.outcome) == (ErrorCode.CONTRACT_MISMATCH, "executed")


async def test_a_reply_from_another_instance_is_refused(space: NATS) -> None:
    other = await scripted(
        space, lambda request, reply: (answer_as(reply, "b" * 26), ok(request, TASK))
    )
    error = await refused(other)
    assert (error.code, error.outcome) == (ErrorCode.FAILED_PRECONDITION, "unknown")


async def test_a_reply_from_another_epoch_is_refused(space: NATS) -> None:
    stale = await scripted(
        space, lambda request, reply: (answer_as(reply, epoch=2), ok(request, TASK))
    )
    error = await refused(stale)
    assert (error.code, error.outcome) == (ErrorCode.EXPIRED, "unknown")


async def test_an_underivable_bind_refusal_is_not_believed(space: NATS) -> None:
    """A bind refusal naming a bind this request did not carry could send the client
    into re-issuing a write that ran: it is refused as internal, not re-issued."""
    sent: list[Json] = []

    def fence(request: Json, reply: str) -> tuple[str, Json]:
        sent.append(request)
        detail = {
            "kind": "ai.cotal.ep.bind-refused",
            "boundTo": {"instanceId": "c" * 26, "epoch": 9},
            "servedBy": {"instanceId": "b" * 26, "epoch": 1},
        }
        error = {"code": "failed-precondition", "message": "x", "outcome": "not-executed"}
        body = {"v": 1, "id": request["id"], "ok": False, "error": {**error, "details": [detail]}}
        return answer_as(reply, "b" * 26), body

    tasks = await scripted(space, fence)
    error = await refused(tasks)
    assert (error.code, error.outcome) == (ErrorCode.INTERNAL, "unknown")
    assert len(sent) == 1


async def test_a_contract_that_does_not_match_its_digest_is_refused(space: NATS) -> None:
    forged = "sha256:" + "0" * 64
    await space.jetstream().publish(f"cotal.{SPACE}.epc.{'0' * 64}", b'{"v":1}')
    tasks = await scripted(space, lambda request, reply: (reply, ok(request, TASK)), forged)
    with pytest.raises(TasksError) as caught:
        await tasks.describe()
    assert (caught.value.code, caught.value.outcome) == (
        ErrorCode.CONTRACT_INVALID,
        "not-executed",
    )
    assert caught.value.message.endswith("report the endpoint's contract to its operator")
