"""Fuzzing the wire: random envelopes on random well-formed subjects, against one bridge.

Every example starts from a good request for a random command on a random subject that
fits the request grammar (written here from the wire reference, not from the bridge's
parser: rail, route, authorization mode with its target tokens, caller triple, nonce) and
then drops fields or replaces them with hostile values: wrong types, huge strings of
backslashes or DEL characters, values nested a thousand deep, unknown fields. Asserted for
every example:

- a call (``replyExpected`` not ``false``) is answered, on the derived reply subject, with
  a reply under a few kilobytes; a refusal carries a catalog code, ``not-executed`` and a
  bounded message, and leaves the board as it was (same ``changeSeq``);
- a cast is never answered (checked over the whole run: a reply rail watcher sees no reply
  to any cast's nonce);
- afterwards the bridge still serves a good call.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nats.aio.msg import Msg

from cotal_tasks.client.wire import flush_queued
from tests.bridge.wire_support import (
    _DROP,
    CATALOG,
    MAX_MESSAGE,
    PREFIX,
    TOKEN,
    Json,
    Stage,
    read_board,
    stage,
)
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is

MAX_REPLY_BYTES = 8192
ANSWER_WAIT_S = 20.0  # generous: a loaded machine must not read slowness as silence
# Each command and the authorization modes it admits (None: untargeted).
ADMITTED: dict[str, list[str | None]] = {
    "describe": [None],
    "list-tasks": [None],
    "get-task": [None],
    "my-tasks": ["self"],
    "create-task": [None],
    "bind-task": ["owner", "any"],
    "claim-task": ["self"],
    "update-task": ["self"],
    "administer-task": [None],
}
# Every authorization mode and its number of target tokens (the wire reference, §2).
MODES: dict[str | None, int] = {
    None: 0,
    "self": 0,
    "owner": 1,
    "any": 1,
    "child": 1,
    "ledger": 1,
    "handle": 3,
    "exact": 3,
}
PATHS = (
    "v",
    "id",
    "op",
    "op.endpoint",
    "op.command",
    "op.inputDigest",
    "op.outputDigest",
    "class",
    "replyExpected",
    "deadlineMs",
    "target",
    "target.owner",
    "target.actor",
    "target.lifecycleUid",
    "target.mappingRevision",
    "bind",
    "bind.instanceId",
    "bind.epoch",
    "args",
    "args.title",
    "args.taskId",
    "args.limit",
    "args.status",
    "args.evidence",
    "from",
    "from.id",
    "from.name",
    "correlation",
)

_token = st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True)
_uid = st.from_regex(r"[a-z0-9]{26}", fullmatch=True)
_DEEP = "a-value-nested-deep-goes-here"
HUGE_CHARS = ["\\", "\x7f", '"', "é", "\U0001f680", "a"]


@dataclass(frozen=True)
class Huge:
    """A long run of one character, kept as (char, size) so a failure report stays short."""

    char: str
    size: int


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists and objects of ``inner`` (a named function: Hypothesis reads its source)."""
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.builds(Huge, st.sampled_from(HUGE_CHARS), st.integers(1, 200_000)),
    st.just(_DEEP),
    st.recursive(
        st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8),
        _nested,
        max_leaves=8,
    ),
)


@dataclass(frozen=True)
class Subject:
    rail: str
    route: str
    mode: str | None
    target: tuple[str, ...]
    caller: tuple[str, str, str]

    def render(self, command: str, instance_id: str, nonce: str) -> str:
        parts = [PREFIX, self.rail, self.route, TOKEN]
        if self.route == "inst":
            parts.append(instance_id)
        parts.append(command)
        if self.mode is not None:
            parts += [self.mode, *self.target]
        parts += list(self.caller)
        if self.rail == "ep.v1":
            parts.append(secrets.token_hex(16))
        parts.append(nonce)
        return ".".join(parts)


@st.composite
def subjects(draw: st.DrawFn, command: str) -> Subject:
    """A well-formed subject: mostly in a mode the command admits, else in any mode."""
    mode = draw(st.sampled_from(ADMITTED[command]) | st.sampled_from(list(MODES)))
    arity = MODES[mode]
    target: tuple[str, ...] = ()
    if arity == 1:
        target = (draw(_token),)
    elif arity == 3:
        target = (draw(_token), draw(_token), draw(_uid))
    caller = (draw(_token), draw(_token), draw(_uid))
    return Subject(
        draw(st.sampled_from(["ep", "ep.v1"])),
        draw(st.sampled_from(["one", "one", "all", "inst"])),
        mode,
        target,
        caller,
    )


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, Subject, bool, list[tuple[str, Any]]]:
    """(command, subject, whether it is a call, changes to its good envelope)."""
    command = draw(st.sampled_from(list(ADMITTED)))
    changes = draw(
        st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(st.just(_DROP), hostile)), max_size=3)
    )
    return command, draw(subjects(command)), draw(st.sampled_from([True, True, False])), changes


@dataclass(repr=False)
class Run:
    """The stage, and every reply the run has seen, by nonce."""

    st: Stage
    replies: dict[str, list[Msg]] = field(default_factory=dict)
    waiters: dict[str, asyncio.Future[Msg]] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Run(<{len(self.replies)} replies seen>)"

    async def keep(self, msg: Msg) -> None:
        nonce = msg.subject.rsplit(".", 1)[1]
        self.replies.setdefault(nonce, []).append(msg)
        waiter = self.waiters.pop(nonce, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(msg)


@pytest.fixture
async def run(mesh: Mesh) -> AsyncIterator[Run]:
    staged = Run(await stage(mesh))
    subs = [
        await mesh.nc.subscribe(f"{PREFIX}.ep.reply.>", cb=staged.keep),
        await mesh.nc.subscribe(f"{PREFIX}.ep.v1.reply.>", cb=staged.keep),
    ]
    await mesh.nc.flush()
    yield staged
    for sub in subs:
        await sub.unsubscribe()


def good_body(st_: Stage, command: str, subject: Subject) -> Json:
    args: dict[str, Json | None] = {
        "describe": None,
        "list-tasks": {"limit": 5},
        "get-task": {"taskId": st_.seed},
        "my-tasks": {},
        "create-task": {"title": "fuzzed"},
        "bind-task": {"taskId": st_.seed},
        "claim-task": {"taskId": st_.seed},
        "update-task": {"taskId": st_.seed, "note": "fuzzed"},
        "administer-task": {"taskId": st_.seed, "note": "fuzzed"},
    }
    body = st_.caller.envelope(command, args=args[command], digests=command != "describe")
    body["from"]["id"] = f"{subject.caller[0]}.{subject.caller[1]}"
    if subject.mode not in (None, "self"):
        owner = subject.target[0] if subject.target else "local"
        body["target"] = {"owner": owner, "actor": "worker", "lifecycleUid": "0" * 26}
    return body


def mutate(body: Json, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = body
    for key in parents:
        if not isinstance(node, dict):
            return
        node = node.setdefault(key, {})
    if not isinstance(node, dict):
        return
    if value is _DROP:
        node.pop(last, None)
    else:
        node[last] = value.char * value.size if isinstance(value, Huge) else value


def to_bytes(body: Json) -> bytes:
    data = json.dumps(body, ensure_ascii=False).encode()
    return data.replace(f'"{_DEEP}"'.encode(), b"[" * 1000 + b"]" * 1000)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(request=requests())
async def test_every_request_is_answered_bounded_or_is_a_silent_cast(
    run: Run, request: tuple[str, Subject, bool, list[tuple[str, Any]]]
) -> None:
    command, subject, call, changes = request
    st_ = run.st
    body = good_body(st_, command, subject)
    body["replyExpected"] = call
    for path, value in changes:
        mutate(body, path, value)
    data = to_bytes(body)
    if len(data) >= st_.mesh.nc.max_payload:
        event("too large to publish")
        return
    nonce = secrets.token_urlsafe(18)
    cast = body.get("replyExpected") is False
    before = await read_board(st_.auditor)
    waiter: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
    run.waiters[nonce] = waiter
    await st_.mesh.nc.publish(subject.render(command, st_.bound.instance_id, nonce), data)
    if cast:
        event("cast")
        run.waiters.pop(nonce, None)
        await _settled(st_.mesh)
        assert nonce not in run.replies, "a cast was answered"
        return
    msg = await asyncio.wait_for(waiter, ANSWER_WAIT_S)
    assert len(msg.data) <= MAX_REPLY_BYTES, len(msg.data)
    reply = json.loads(msg.data)
    assert reply["v"] == 1
    if reply["ok"]:
        event(f"ok: {command}")
        return
    error = reply["error"]
    event(f"refused: {error['code']}")
    assert error["code"] in CATALOG, error
    assert error["outcome"] == "not-executed", (body if len(data) < 2000 else command, error)
    assert 0 < len(error["message"]) <= MAX_MESSAGE, error
    assert await read_board(st_.auditor) == before


async def _settled(mesh: Mesh) -> None:
    """Wait until the bridge has handled every request it took and anything it published
    has reached this client: its in-flight set is empty, its connection flushed to the
    broker, then ours (one broker orders what it routes to us before our PONG)."""
    await flush_queued(mesh.nc)
    for server in mesh.bridge.servers:
        while server._pending:
            await asyncio.gather(*list(server._pending), return_exceptions=True)
        await flush_queued(server.nc)
    await flush_queued(mesh.nc)
