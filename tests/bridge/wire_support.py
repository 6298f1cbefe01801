"""What the wire bad-input tests share: a staged board, an auditor reading it, refusal
assertions, a watcher of what the bridge publishes, and edits of a good envelope.

The subjects and envelopes are written by hand (``TestCaller.subject``/``envelope`` plus
these edits), so nothing goes through the bridge's own caller.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from cotal_tasks.core import ErrorCode
from tests.conformance.conftest import Mesh
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE
from tests.support.cotal import Bound, TestCaller
from tests.support.loopback import LoopbackMesh

Json = dict[str, Any]
Edit = Callable[[Json, Bound], Any]

PREFIX = f"cotal.{SPACE}"
TOKEN = ENDPOINT.replace(".", "_")
RID = "bad-input-request-1"
SILENCE_S = 1.0
ZERO_DIGEST = "sha256:" + "0" * 64
BIND_REFUSED = "ai.cotal.ep.bind-refused"
WORKER = seat("worker", 7)
CATALOG = frozenset(code.value for code in ErrorCode)  # pinned to Cotal's by test_identity
MAX_MESSAGE = 1000

# -- helpers ----------------------------------------------------------------------------------


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()


def other_instance_id(bound: Bound) -> str:
    while (candidate := secrets.token_hex(13)) == bound.instance_id:
        pass
    return candidate


@dataclass(frozen=True)
class Board:
    """What list-tasks shows: the change counter and every task summary by id."""

    change_seq: int
    tasks: dict[str, Json]


async def read_board(auditor: TestCaller) -> Board:
    page = await auditor.ok("list-tasks", {"limit": 100})
    assert page.get("nextCursor") is None, "the tests keep the board to one page"
    return Board(page["changeSeq"], {t["taskId"]: t for t in page["tasks"]})


@dataclass
class Stage:
    """A described caller, an auditor reading the board, a seed task, the board before."""

    mesh: Any  # a Mesh over the real broker, or a LoopbackMesh (tests/support/loopback.py)
    caller: TestCaller
    auditor: TestCaller
    seed: str
    before: Board

    @property
    def bound(self) -> Bound:
        assert self.caller.bound is not None
        return self.caller.bound


async def stage(mesh: Mesh | LoopbackMesh) -> Stage:
    caller = mesh.caller("sender", 1)
    auditor = mesh.caller("auditor", 2)
    if caller.bound is None:  # a loopback caller is bound already
        await caller.describe()
    seed = (await auditor.ok("create-task", {"title": "seed task"}))["taskId"]
    return Stage(mesh, caller, auditor, seed, await read_board(auditor))


async def assert_unchanged_and_serving(st: Stage) -> None:
    """Nothing moved, and a good call from the same caller still succeeds afterwards."""
    assert await read_board(st.auditor) == st.before
    made = await st.caller.ok("create-task", {"title": "a good call after the bad one"})
    after = await read_board(st.auditor)
    assert after.change_seq == st.before.change_seq + 1
    assert set(after.tasks) == set(st.before.tasks) | {made["taskId"]}


def assert_refusal(reply: Json, *, code: str, request_id: str) -> Json:
    """A structured refusal before any effect; returns its error object."""
    assert reply["v"] == 1
    assert reply["ok"] is False, reply
    assert "data" not in reply
    assert reply["id"] == request_id, reply
    error: Json = reply["error"]
    assert error["code"] == code, error
    assert error["outcome"] == "not-executed", error
    assert isinstance(error["message"], str)
    assert 0 < len(error["message"]) <= MAX_MESSAGE, error
    return error


async def send(
    caller: TestCaller, subject: str, data: bytes, request_nonce: str, *, wait: float = 5
) -> tuple[Msg, Json] | None:
    return await caller.exchange(subject, data, request_nonce, wait=wait)


async def answered(caller: TestCaller, subject: str, data: bytes, request_nonce: str) -> Json:
    got = await send(caller, subject, data, request_nonce)
    assert got is not None, "the bridge sent no reply"
    return got[1]


@asynccontextmanager
async def watching(mesh: Mesh, *filters: str) -> AsyncIterator[list[Msg]]:
    """Collect every message published on ``filters`` while the block runs."""
    seen: list[Msg] = []

    async def keep(msg: Msg) -> None:
        seen.append(msg)

    subs = [await mesh.nc.subscribe(f, cb=keep) for f in filters]
    await mesh.nc.flush()
    try:
        yield seen
    finally:
        await mesh.nc.flush()
        for sub in subs:
            await sub.unsubscribe()


REPLY_RAILS = (f"{PREFIX}.ep.reply.>", f"{PREFIX}.ep.v1.reply.>")


# -- envelope edits ---------------------------------------------------------------------------

_DROP = object()


def edit(changes: dict[str, Any]) -> Edit:
    """Set (or with ``_DROP`` remove) dotted paths in the body."""

    def apply(body: Json, _bound: Bound) -> Json:
        for path, value in changes.items():
            *parents, last = path.split(".")
            node = body
            for key in parents:
                node = node[key]
            if value is _DROP:
                node.pop(last, None)
            else:
                node[last] = value
        return body

    return apply


def digests_of(command: str, *, swap: bool = False) -> Edit:
    """Pin another command's digests (or the right command's, swapped)."""

    def apply(body: Json, bound: Bound) -> Json:
        row = bound.row(command)
        pair = (row["inputDigest"], row["outputDigest"])
        body["op"]["inputDigest"], body["op"]["outputDigest"] = pair[::-1] if swap else pair
        return body

    return apply


def as_command(command: str) -> Edit:
    """Name another command in op (with that command's own digests)."""

    def apply(body: Json, bound: Bound) -> Json:
        body["op"]["command"] = command
        pinned: Json = digests_of(command)(body, bound)
        return pinned

    return apply


def with_target(owner: str = WORKER.owner) -> Edit:
    return edit(
        {"target": {"owner": owner, "actor": WORKER.actor, "lifecycleUid": WORKER.lifecycleUid}}
    )


def then(*edits: Edit) -> Edit:
    def apply(body: Json, bound: Bound) -> Any:
        for e in edits:
            body = e(body, bound)
        return body

    return apply


def raw(data: bytes) -> Edit:
    return lambda _body, _bound: data


def wrapped_in_array(body: Json, _bound: Bound) -> list[Json]:
    return [body]


_DEEP = "nested-array-goes-here"


def deep(path: str, depth: int = 1000) -> Edit:
    """Set ``path`` to an array nested ``depth`` deep, as bytes: Python's json nests less."""

    def apply(body: Json, bound: Bound) -> bytes:
        marked = encode(edit({path: _DEEP})(body, bound))
        return marked.replace(f'"{_DEEP}"'.encode(), b"[" * depth + b"]" * depth)

    return apply


def payload(edited: Any) -> bytes:
    """What an edit produced, as the bytes to publish."""
    return edited if isinstance(edited, bytes) else encode(edited)


async def assert_all_silent(st: Stage, sends: list[tuple[str, str, bytes, str]]) -> None:
    """Publish each ``(what, subject, body, reply nonce)`` at once: none is answered, and
    nothing at all appears on the reply rails or the event plane meanwhile."""

    async def one(what: str, subject: str, data: bytes, request_nonce: str) -> tuple[str, Any]:
        return what, await send(st.caller, subject, data, request_nonce, wait=SILENCE_S)

    async with watching(st.mesh, *REPLY_RAILS, f"{PREFIX}.epe.>") as seen:
        results = await asyncio.gather(*(one(*c) for c in sends))
    assert [what for what, got in results if got is not None] == []
    assert [m.subject for m in seen] == [], "something answered or wrote"
