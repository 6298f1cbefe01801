"""Hostile values get a bounded, honest refusal: answered, short, with an outcome.

Each case is a request fuzzing once found answered wrongly or not at all: a value of half a
million backslashes or DEL characters (quoted, it outgrew the broker's payload limit, so the
publish failed and the caller heard nothing), a ``v`` or ``class`` nested a thousand deep
(quoting it raised ``RecursionError``, answered ``internal`` with ``outcome: unknown``), and
a ``bind-task`` at mode ``any`` whose ``target.actor`` is no token (refused with no
``outcome``). (Half a million no longer reaches the field checks: a body over the request
ceiling is refused unread, which is a case of its own; the values are now fifty thousand
long.) Each is now refused with its catalog code and ``not-executed``, in a short
message that shows at most a prefix of the value, and changes nothing.

The table runs on the loopback wire (``tests/support/loopback.py``: the endpoint's real
server, envelope and admission code, no nats-server) with the broker's default payload
limit; three rows run again over a real bridge through a private nats-server, where the
limit is the broker's own.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from cotal_tasks.bridge.service.validation import PREVIEW_CHARS
from tests.bridge.wire_support import (
    _DROP,
    RID,
    WORKER,
    Edit,
    Json,
    Stage,
    answered,
    assert_refusal,
    assert_unchanged_and_serving,
    deep,
    edit,
    payload,
    stage,
)
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is
from tests.conftest import Clock
from tests.support.bridge import SPACE, bridge_config, bridge_on, broker, client, set_up_space
from tests.support.cotal import Bound, Space, nonce
from tests.support.loopback import loopback_mesh

# Long enough that quoting them whole would have outgrown a reply, short enough that the
# body stays under the request ceiling (``core.ceiling``) and reaches the field checks.
BACKSLASHES = "\\" * 50_000
DELS = "\x7f" * 50_000
MAX_REPLY_BYTES = 4096
SMALL_PAYLOAD = 32 * 1024


@dataclass(frozen=True)
class Hostile:
    code: str
    change: Edit
    command: str = "create-task"
    mode: str | None = None
    echo: bool = True


def _raw_utf8(change: Edit) -> Edit:
    """The edit, sent as UTF-8 JSON (a DEL stays one byte instead of six)."""

    def apply(body: Json, bound: Bound) -> bytes:
        return json.dumps(change(body, bound), ensure_ascii=False).encode()

    return apply


CASES = {
    "id of backslashes": Hostile("bad-request", edit({"id": BACKSLASHES}), echo=False),
    "id of DEL characters": Hostile("bad-request", _raw_utf8(edit({"id": DELS})), echo=False),
    "op.endpoint of backslashes": Hostile("bad-request", edit({"op.endpoint": BACKSLASHES})),
    "op.command of DEL characters": Hostile("bad-request", _raw_utf8(edit({"op.command": DELS}))),
    "class of backslashes": Hostile("bad-request", edit({"class": BACKSLASHES})),
    "from.id of backslashes": Hostile("sender-mismatch", edit({"from.id": BACKSLASHES})),
    "inputDigest of DEL characters": Hostile(
        "bad-request", _raw_utf8(edit({"op.inputDigest": DELS}))
    ),
    "args.title of backslashes": Hostile("bad-request", edit({"args": {"title": BACKSLASHES}})),
    "an args key of backslashes": Hostile(
        "bad-request", edit({"args": {"title": "x", BACKSLASHES: 1}})
    ),
    "v nested 1,000 deep": Hostile("unsupported-version", deep("v")),
    "class nested 1,000 deep": Hostile("bad-request", deep("class")),
    "args.title nested 1,000 deep": Hostile("bad-request", deep("args.title")),
    "from nested 1,000 deep": Hostile("bad-request", deep("from")),
    "a body nested 2,000 deep": Hostile(
        "bad-request", lambda _b, _n: b"[" * 2000 + b"]" * 2000, echo=False
    ),
    "bind-task at mode any, target.actor no token": Hostile(
        "bad-request",
        edit(
            {
                "args": {"taskId": "t-anything"},
                "target": {"owner": WORKER.owner, "actor": "no token!", "lifecycleUid": "a" * 26},
            }
        ),
        command="bind-task",
        mode="any",
    ),
    "bind-task at mode any, target.actor of backslashes": Hostile(
        "bad-request",
        edit(
            {
                "args": {"taskId": "t-anything"},
                "target": {"owner": WORKER.owner, "actor": BACKSLASHES, "lifecycleUid": "a" * 26},
            }
        ),
        command="bind-task",
        mode="any",
    ),
    "deadlineMs past 2^53": Hostile("bad-request", edit({"deadlineMs": 2**60})),
    "a body over the request ceiling": Hostile(
        "bad-request", edit({"args": {"title": "x", "pad": "x" * 200_000}}), echo=False
    ),
    "from dropped": Hostile("bad-request", edit({"from": _DROP})),
}


OVER_THE_BROKER = ("id of backslashes", "v nested 1,000 deep", "from.id of backslashes")


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
async def test_a_hostile_value_is_refused_short_and_honestly(clock: Clock, case: Hostile) -> None:
    async with loopback_mesh(clock) as mesh:
        await refused_short_and_honestly(await stage(mesh), mesh.nc.max_payload, case)


@pytest.mark.parametrize("name", OVER_THE_BROKER)
async def test_over_the_broker_a_hostile_value_is_refused_short_and_honestly(
    mesh: Mesh, name: str
) -> None:
    await refused_short_and_honestly(await stage(mesh), mesh.nc.max_payload, CASES[name])


async def refused_short_and_honestly(st: Stage, max_payload: int, case: Hostile) -> None:
    request_nonce = nonce()
    subject = st.caller.subject(
        case.command, request_nonce, mode=case.mode, target_owner=WORKER.owner
    )
    body = st.caller.envelope(case.command, args={"title": "never made"}, request_id=RID)
    data = payload(case.change(copy.deepcopy(body), st.bound))
    assert len(data) < max_payload, "the request itself must fit the broker"

    got = await st.caller.exchange(subject, data, request_nonce)

    assert got is not None, "the bridge sent no reply"
    msg, reply = got
    assert len(msg.data) <= MAX_REPLY_BYTES, len(msg.data)
    error = assert_refusal(reply, code=case.code, request_id=RID if case.echo else "invalid")
    message = error["message"]
    assert message.count("\\") <= 2 * PREVIEW_CHARS, message  # at most an escaped prefix
    assert "\x7f" not in message
    await assert_unchanged_and_serving(st)


async def test_a_bind_task_refusal_names_the_field(mesh: Mesh) -> None:
    st = await stage(mesh)
    request_nonce = nonce()
    subject = st.caller.subject("bind-task", request_nonce, mode="any", target_owner="local")
    body = st.caller.envelope("bind-task", args={"taskId": st.seed}, request_id=RID)
    body["target"] = {"owner": "local", "actor": "no token!", "lifecycleUid": "a" * 26}

    reply = await answered(st.caller, subject, payload(body), request_nonce)

    error = assert_refusal(reply, code="bad-request", request_id=RID)
    assert "target.actor" in error["message"]
    assert "Send one matching" in error["message"]


async def test_a_reply_past_the_payload_limit_is_replaced_by_a_short_error(
    tmp_path: Path,
) -> None:
    """A broker with a small payload limit: a page that would not fit is answered with
    resource-exhausted naming the remedy, never dropped."""
    conf = tmp_path / "small.conf"
    conf.write_text(f"max_payload: {SMALL_PAYLOAD}\n", encoding="utf-8")
    async with broker(tmp_path, config_file=conf) as server:
        await set_up_space(server.url)
        async with bridge_on(bridge_config(server.url, tmp_path / "bridge")) as running:
            nc = await client(server.url)
            try:
                mesh = Mesh(server.url, running, nc, Space(nc.jetstream(), SPACE))
                caller = mesh.caller("reader")
                for n in range(100):
                    await caller.ok("create-task", {"title": f"{n:03d} " + "x" * 190})
                small = await caller.ok("list-tasks", {"limit": 5})
                assert len(small["tasks"]) == 5

                reply = await caller.call("list-tasks", {"limit": 100})

                assert reply["ok"] is False, "a page over the payload limit was sent"
                error = reply["error"]
                assert error["code"] == "resource-exhausted", error
                assert error["outcome"] == "executed"
                assert "smaller list limit" in error["message"]
                assert (await caller.ok("list-tasks", {"limit": 5}))["tasks"] == small["tasks"]
            finally:
                await nc.close()
