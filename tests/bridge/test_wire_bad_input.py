"""Bad input over the real wire: every refusal a running bridge owes, and its silences.

Each test talks to a real bridge through a private nats-server (the ``mesh`` fixture). The
subjects and envelopes are written here by hand (``TestCaller.subject``/``envelope`` plus
edits), so nothing goes through the bridge's own caller. For every refusal the tests check
the error code, ``outcome: not-executed``, the echoed id (the request's, or ``invalid`` when
the body carries no usable one), that the board did not move (same ``changeSeq``, no new
task), and that the bridge keeps serving: a good call from the same caller succeeds after.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from nats.aio.msg import Msg

from cotal_tasks.core import Seat
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is
from tests.conftest import seat
from tests.support.bridge import ENDPOINT, SPACE
from tests.support.cotal import Bound, TestCaller, nonce

Json = dict[str, Any]
Edit = Callable[[Json, Bound], Any]

PREFIX = f"cotal.{SPACE}"
TOKEN = ENDPOINT.replace(".", "_")
RID = "bad-input-request-1"
SILENCE_S = 1.0
ZERO_DIGEST = "sha256:" + "0" * 64
BIND_REFUSED = "ai.cotal.ep.bind-refused"
WORKER = seat("worker", 7)


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

    mesh: Mesh
    caller: TestCaller
    auditor: TestCaller
    seed: str
    before: Board

    @property
    def bound(self) -> Bound:
        assert self.caller.bound is not None
        return self.caller.bound


async def stage(mesh: Mesh) -> Stage:
    caller = mesh.caller("sender", 1)
    auditor = mesh.caller("auditor", 2)
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
    assert error["message"]
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


# -- refusals, one case each ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    code: str
    change: Edit
    command: str = "create-task"
    args: Callable[[str], Json | None] = lambda _seed: {"title": "must never be created"}
    mode: str | None = None
    target_owner: str | None = None
    echo: bool = True  # False: the reply id is "invalid"


def _case(name: str, case: Case, *marks: pytest.MarkDecorator) -> Any:
    return pytest.param(case, id=name, marks=marks)


CASES = [
    # -- the body is not an envelope at all
    _case("non-json body", Case("bad-request", raw(b"{this is not json"), echo=False)),
    _case("empty body", Case("bad-request", raw(b""), echo=False)),
    _case("non-utf8 body", Case("bad-request", raw(b"\xff\xfe\x00"), echo=False)),
    _case("json array body", Case("bad-request", wrapped_in_array, echo=False)),
    _case("json string body", Case("bad-request", raw(b'"v1 please"'), echo=False)),
    _case("id not an id token", Case("bad-request", edit({"id": "has space"}), echo=False)),
    _case("id missing", Case("bad-request", edit({"id": _DROP}), echo=False)),
    # -- version first, before anything else
    _case("v 2", Case("unsupported-version", edit({"v": 2}))),
    _case("v missing", Case("unsupported-version", edit({"v": _DROP}))),
    _case("v as a string", Case("unsupported-version", edit({"v": "1"}))),
    _case("v true", Case("unsupported-version", edit({"v": True}))),
    _case(
        "v 2 with every other defect",
        Case(
            "unsupported-version",
            then(
                edit(
                    {
                        "v": 2,
                        "op.inputDigest": _DROP,
                        "op.outputDigest": _DROP,
                        "from.id": "local.impostor",
                        "class": "journal",
                        "deadlineMs": _DROP,
                        "args": {"bogus": True},
                    }
                ),
                as_command("list-tasks"),
                with_target(),
                edit({"op.inputDigest": _DROP}),
            ),
        ),
    ),
    _case(
        "v 2 and a bad id",
        Case("unsupported-version", edit({"v": 2, "id": "no/slashes"}), echo=False),
    ),
    # -- digests
    _case("inputDigest missing", Case("contract-mismatch", edit({"op.inputDigest": _DROP}))),
    _case("outputDigest missing", Case("contract-mismatch", edit({"op.outputDigest": _DROP}))),
    _case(
        "both digests missing",
        Case("contract-mismatch", edit({"op.inputDigest": _DROP, "op.outputDigest": _DROP})),
    ),
    _case("another command's digests", Case("contract-mismatch", digests_of("list-tasks"))),
    _case("digests swapped", Case("contract-mismatch", digests_of("create-task", swap=True))),
    _case(
        "well-formed unknown digests",
        Case("contract-mismatch", edit({"op.inputDigest": ZERO_DIGEST})),
    ),
    # -- the body against the subject
    _case("from.id not the subject's sender", Case("sender-mismatch", edit({"from.id": "x.y"}))),
    _case(
        "from.id names another actor",
        Case("sender-mismatch", edit({"from.id": "local.auditor"})),
    ),
    _case("op.command not the subject's", Case("op-mismatch", as_command("list-tasks"))),
    _case(
        "op.endpoint not the subject's",
        Case("op-mismatch", edit({"op.endpoint": "com.other.tasks"})),
    ),
    _case("body target on an untargeted command", Case("target-mismatch", with_target())),
    _case(
        "owner subject with no body target",
        Case(
            "target-mismatch",
            edit({}),
            command="bind-task",
            args=lambda s: {"taskId": s},
            mode="owner",
            target_owner=WORKER.owner,
        ),
    ),
    _case(
        "owner subject with another target owner in the body",
        Case(
            "target-mismatch",
            with_target(owner="someone_else"),
            command="bind-task",
            args=lambda s: {"taskId": s},
            mode="owner",
            target_owner=WORKER.owner,
        ),
    ),
    _case(
        "self subject with a body target",
        Case(
            "target-mismatch",
            with_target(),
            command="claim-task",
            args=lambda s: {"taskId": s},
            mode="self",
        ),
    ),
    # -- verb and class
    _case("class journal on a call", Case("bad-request", edit({"class": "journal"}))),
    _case("class record", Case("bad-request", edit({"class": "record"}))),
    _case("replyExpected missing", Case("bad-request", edit({"replyExpected": _DROP}))),
    _case("deadlineMs missing on a call", Case("bad-request", edit({"deadlineMs": _DROP}))),
    _case("deadlineMs zero", Case("bad-request", edit({"deadlineMs": 0}))),
    _case("deadlineMs negative", Case("bad-request", edit({"deadlineMs": -5}))),
    # -- mode admission
    _case(
        "claim-task untargeted",
        Case("permission-denied", edit({}), command="claim-task", args=lambda s: {"taskId": s}),
    ),
    _case("create-task in mode self", Case("permission-denied", edit({}), mode="self")),
    _case(
        "bind-task in mode self",
        Case(
            "permission-denied",
            edit({}),
            command="bind-task",
            args=lambda s: {"taskId": s},
            mode="self",
        ),
    ),
    _case(
        "my-tasks untargeted",
        Case("permission-denied", edit({}), command="my-tasks", args=lambda _s: {}),
    ),
    # -- args against the input schema
    _case(
        "args with an unknown field",
        Case("bad-request", edit({"args": {"title": "x", "priority": "high"}})),
    ),
    _case("args title of the wrong type", Case("bad-request", edit({"args": {"title": 5}}))),
    _case("args without the required title", Case("bad-request", edit({"args": {}}))),
    _case("args title null", Case("bad-request", edit({"args": {"title": None}}))),
    _case("args null for an object input", Case("bad-request", edit({"args": None}))),
    _case("args not an object", Case("bad-request", edit({"args": ["title"]}))),
    _case(
        "list-tasks limit 0",
        Case("bad-request", edit({}), command="list-tasks", args=lambda _s: {"limit": 0}),
    ),
    _case(
        "list-tasks limit as a string",
        Case("bad-request", edit({}), command="list-tasks", args=lambda _s: {"limit": "10"}),
    ),
    _case(
        "list-tasks limit true",
        Case("bad-request", edit({}), command="list-tasks", args=lambda _s: {"limit": True}),
    ),
    _case(
        "list-tasks unknown status",
        Case("bad-request", edit({}), command="list-tasks", args=lambda _s: {"status": ["later"]}),
    ),
    _case(
        "claim-task without a taskId",
        Case("bad-request", edit({}), command="claim-task", args=lambda _s: {}, mode="self"),
    ),
]


@pytest.mark.parametrize("case", CASES)
async def test_a_bad_request_is_refused_before_any_effect(mesh: Mesh, case: Case) -> None:
    st = await stage(mesh)
    request_nonce = nonce()
    subject = st.caller.subject(
        case.command, request_nonce, mode=case.mode, target_owner=case.target_owner
    )
    body = st.caller.envelope(case.command, args=case.args(st.seed), request_id=RID)
    payload = case.change(copy.deepcopy(body), st.bound)
    data = payload if isinstance(payload, bytes) else encode(payload)

    reply = await answered(st.caller, subject, data, request_nonce)

    assert_refusal(reply, code=case.code, request_id=RID if case.echo else "invalid")
    await assert_unchanged_and_serving(st)


async def test_describe_carrying_digests_is_refused(mesh: Mesh) -> None:
    st = await stage(mesh)
    request_nonce = nonce()
    body = st.caller.envelope("describe", args=None, request_id=RID, digests=False)
    row = st.bound.row("list-tasks")
    body["op"]["inputDigest"] = row["inputDigest"]
    body["op"]["outputDigest"] = row["outputDigest"]

    reply = await answered(
        st.caller, st.caller.subject("describe", request_nonce), encode(body), request_nonce
    )

    assert reply["ok"] is False, f"describe with digests was answered: {reply}"
    assert reply["error"]["code"] in ("bad-request", "contract-mismatch")
    assert_refusal(reply, code=reply["error"]["code"], request_id=RID)
    await assert_unchanged_and_serving(st)


# -- the bind fence ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["another instance", "same instance, another epoch"])
async def test_the_bind_fence_refuses_another_incarnation(mesh: Mesh, which: str) -> None:
    st = await stage(mesh)
    served = mesh.bridge.servers[0].identity
    assert (st.bound.instance_id, st.bound.epoch) == (served.instance_id, served.epoch)
    if which == "another instance":
        bound_to = {"instanceId": other_instance_id(st.bound), "epoch": st.bound.epoch}
        code = "failed-precondition"
    else:
        bound_to = {"instanceId": st.bound.instance_id, "epoch": st.bound.epoch + 1}
        code = "expired"
    request_nonce = nonce()
    body = st.caller.envelope("create-task", args={"title": "fenced"}, request_id=RID)
    body["bind"] = bound_to

    reply = await answered(
        st.caller, st.caller.subject("create-task", request_nonce), encode(body), request_nonce
    )

    error = assert_refusal(reply, code=code, request_id=RID)
    assert error["details"] == [
        {
            "kind": BIND_REFUSED,
            "endpoint": ENDPOINT,
            "command": "create-task",
            "boundTo": bound_to,
            "servedBy": {"instanceId": served.instance_id, "epoch": served.epoch},
        }
    ]
    await assert_unchanged_and_serving(st)


# -- target currency (bind-task, mode owner) --------------------------------------------------


def bind_body(st: Stage, target: Seat, mapping_revision: int | None = None) -> Json:
    body = st.caller.envelope("bind-task", args={"taskId": st.seed}, request_id=RID, target=target)
    if mapping_revision is not None:
        body["target"]["mappingRevision"] = mapping_revision
    return body


async def send_bind(st: Stage, body: Json) -> Json:
    request_nonce = nonce()
    subject = st.caller.subject(
        "bind-task", request_nonce, mode="owner", target_owner=body["target"]["owner"]
    )
    return await answered(st.caller, subject, encode(body), request_nonce)


@pytest.mark.parametrize("state", ["no lifecycle head", "another lifecycle uid", "stale pin"])
async def test_bind_task_refuses_a_target_that_is_not_current(mesh: Mesh, state: str) -> None:
    st = await stage(mesh)
    pin: int | None = None
    if state == "another lifecycle uid":
        await mesh.space.activate(seat(WORKER.actor, 8))  # the principal's newer incarnation
    elif state == "stale pin":
        revision = await mesh.space.activate(WORKER)
        pin = revision + 1

    reply = await send_bind(st, bind_body(st, WORKER, pin))

    assert_refusal(reply, code="expired", request_id=RID)
    seed = await st.auditor.ok("get-task", {"taskId": st.seed})
    assert seed.get("binding") is None
    assert seed["status"] == "open"
    await assert_unchanged_and_serving(st)


@pytest.mark.parametrize("pinned", [False, True])
async def test_bind_task_binds_a_current_target(mesh: Mesh, pinned: bool) -> None:
    st = await stage(mesh)
    revision = await mesh.space.activate(WORKER)

    reply = await send_bind(st, bind_body(st, WORKER, revision if pinned else None))

    assert reply["ok"] is True, reply
    assert reply["id"] == RID
    task = reply["data"]
    assert task["taskId"] == st.seed
    assert task["status"] == "claimed"
    binding = task["binding"]
    assert (binding["owner"], binding["actor"], binding["lifecycleUid"]) == (
        WORKER.owner,
        WORKER.actor,
        WORKER.lifecycleUid,
    )
    assert binding["boundBy"] == st.caller.seat.principal
    assert (await read_board(st.auditor)).change_seq == st.before.change_seq + 1


# -- subjects that fit no shape: never handled, never answered --------------------------------


def malformed_subjects(caller: TestCaller, other_iid: str) -> Iterator[tuple[str, str, str]]:
    """(what, subject, the nonce a reply would be addressed to)."""
    s = caller.seat
    triple = f"{s.owner}.{s.actor}.{s.lifecycleUid}"
    base = f"{PREFIX}.ep.one.{TOKEN}.create-task"
    n = [nonce() for _ in range(10)]  # one per case
    yield "an extra token after the nonce", f"{base}.{triple}.{n[0]}.extra", "extra"
    yield "an extra token before the caller", f"{base}.extra.{triple}.{n[1]}", n[1]
    yield "a nonce too short", f"{base}.{triple}.short", "short"
    yield "mode owner without its target token", f"{base}.owner.{triple}.{n[2]}", n[2]
    yield "mode self with a target token", f"{base}.self.local.{triple}.{n[3]}", n[3]
    yield "mode handle with one target token", f"{base}.handle.local.{triple}.{n[4]}", n[4]
    yield (
        "a caller uid that is no lifecycle token",
        f"{base}.{s.owner}.{s.actor}.NOT_A_UID.{n[5]}",
        n[5],
    )
    yield (
        "another endpoint's token",
        f"{PREFIX}.ep.one.com_other_tasks.create-task.{triple}.{n[6]}",
        n[6],
    )
    yield (
        "another instance on the inst rail",
        f"{PREFIX}.ep.inst.{TOKEN}.{other_iid}.create-task.{triple}.{n[7]}",
        n[7],
    )
    yield (
        "a command the endpoint does not serve",
        f"{PREFIX}.ep.one.{TOKEN}.delete-task.{triple}.{n[9]}",
        n[9],
    )
    yield (
        "the v1 rail without a generation",
        f"{PREFIX}.ep.v1.one.{TOKEN}.create-task.{triple}.{n[8]}",
        n[8],
    )


async def test_a_subject_that_fits_no_shape_gets_no_reply(mesh: Mesh) -> None:
    st = await stage(mesh)
    cases = list(malformed_subjects(st.caller, other_instance_id(st.bound)))

    async def one(what: str, subject: str, request_nonce: str) -> tuple[str, Any]:
        body = st.caller.envelope("create-task", args={"title": f"ghost: {what}"})
        got = await send(st.caller, subject, encode(body), request_nonce, wait=SILENCE_S)
        return what, got

    async with watching(mesh, *REPLY_RAILS, f"{PREFIX}.epe.>") as seen:
        results = await asyncio.gather(*(one(*c) for c in cases))

    assert [what for what, got in results if got is not None] == []
    assert [m.subject for m in seen] == [], "something answered or wrote"
    await assert_unchanged_and_serving(st)


# -- casts ------------------------------------------------------------------------------------


async def test_a_valid_cast_creates_the_task_and_sends_no_reply(mesh: Mesh) -> None:
    st = await stage(mesh)
    request_nonce = nonce()
    body = st.caller.envelope(
        "create-task", args={"title": "cast me"}, request_id=RID, reply_expected=False
    )
    del body["deadlineMs"]  # a cast needs no deadline

    async with (
        watching(mesh, *REPLY_RAILS) as replies,
        watching(mesh, f"{PREFIX}.epe.>") as events,
    ):
        got = await send(
            st.caller,
            st.caller.subject("create-task", request_nonce),
            encode(body),
            request_nonce,
            wait=SILENCE_S,
        )

    assert got is None, f"a cast was answered: {got[1] if got else None}"
    assert replies == []
    board = await read_board(st.auditor)
    made = [t for t in board.tasks.values() if t["title"] == "cast me"]
    assert len(made) == 1
    assert board.change_seq == st.before.change_seq + 1
    assert set(board.tasks) == set(st.before.tasks) | {made[0]["taskId"]}
    assert len(events) == 1  # the one board-changed wake for the one write
    assert json.loads(events[0].data)["data"]["changeSeq"] == board.change_seq


def _cast_errors(st: Stage) -> Iterator[tuple[str, str, Json]]:
    """(what, command subject, body) — casts that fail after the envelope parsed."""
    n = nonce()

    def cast(command: str, args: Json, **kw: Any) -> Json:
        return st.caller.envelope(command, args=args, reply_expected=False, **kw)

    bad_digests = cast("create-task", {"title": "cast: wrong digests"})
    bad_digests["op"]["inputDigest"] = ZERO_DIGEST
    yield "wrong digests", st.caller.subject("create-task", n), bad_digests
    n = nonce()
    sender = cast("create-task", {"title": "cast: sender"})
    sender["from"]["id"] = "local.impostor"
    yield "sender mismatch", st.caller.subject("create-task", n), sender
    n = nonce()
    schema = cast("create-task", {"title": "cast: schema", "bogus": 1})
    yield "args failing the schema", st.caller.subject("create-task", n), schema
    n = nonce()
    fenced = cast("create-task", {"title": "cast: fenced"})
    fenced["bind"] = {"instanceId": other_instance_id(st.bound), "epoch": 1}
    yield "bind to another instance", st.caller.subject("create-task", n), fenced
    n = nonce()
    denied = cast("create-task", {"title": "cast: denied"})
    yield "mode not admitted", st.caller.subject("create-task", n, mode="self"), denied
    n = nonce()
    expired = cast("bind-task", {"taskId": st.seed}, target=WORKER)
    subject = st.caller.subject("bind-task", n, mode="owner", target_owner=WORKER.owner)
    yield "target not current", subject, expired


async def test_a_cast_that_fails_stays_silent(mesh: Mesh) -> None:
    st = await stage(mesh)
    cases = list(_cast_errors(st))

    async def one(what: str, subject: str, body: Json) -> tuple[str, Any]:
        request_nonce = subject.rsplit(".", 1)[1]
        got = await send(st.caller, subject, encode(body), request_nonce, wait=SILENCE_S)
        return what, got

    async with watching(mesh, *REPLY_RAILS, f"{PREFIX}.epe.>") as seen:
        results = await asyncio.gather(*(one(*c) for c in cases))

    assert [what for what, got in results if got is not None] == []
    assert [m.subject for m in seen] == []
    assert (await st.auditor.ok("get-task", {"taskId": st.seed})).get("binding") is None
    await assert_unchanged_and_serving(st)


async def test_a_journal_class_cast_gets_no_reply_and_does_nothing(mesh: Mesh) -> None:
    st = await stage(mesh)
    request_nonce = nonce()
    body = st.caller.envelope(
        "create-task", args={"title": "journal"}, request_id=RID, reply_expected=False
    )
    body["class"] = "journal"  # deadlineMs stays: a journal submission needs one

    async with watching(mesh, *REPLY_RAILS, f"{PREFIX}.epe.>") as seen:
        got = await send(
            st.caller,
            st.caller.subject("create-task", request_nonce),
            encode(body),
            request_nonce,
            wait=SILENCE_S,
        )

    assert got is None
    assert seen == []
    await assert_unchanged_and_serving(st)


@pytest.mark.parametrize(
    ("what", "change", "code"),
    [
        ("v 2", edit({"v": 2}), "unsupported-version"),
        ("digests missing", edit({"op.inputDigest": _DROP}), "contract-mismatch"),
    ],
)
async def test_a_cast_whose_envelope_does_not_parse_is_answered(
    mesh: Mesh, what: str, change: Edit, code: str
) -> None:
    """As ``serveEndpoint`` does: a body that does not parse carries no trustworthy verb, so
    its ``replyExpected: false`` is not believed and the refusal goes to the derived,
    nonce-scoped subject (a real cast caller holds no subscription there)."""
    st = await stage(mesh)
    request_nonce = nonce()
    body = st.caller.envelope(
        "create-task", args={"title": what}, request_id=RID, reply_expected=False
    )
    reply = await answered(
        st.caller,
        st.caller.subject("create-task", request_nonce),
        encode(change(body, st.bound)),
        request_nonce,
    )
    assert_refusal(reply, code=code, request_id=RID)
    await assert_unchanged_and_serving(st)


# -- where replies go -------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["success", "refusal"])
@pytest.mark.parametrize("rail", ["ep", "ep.v1"])
async def test_the_reply_goes_to_the_derived_subject_never_to_reply_to(
    mesh: Mesh, outcome: str, rail: str
) -> None:
    st = await stage(mesh)
    served = mesh.bridge.servers[0].identity
    request_nonce = nonce()
    generation = secrets.token_hex(16) if rail == "ep.v1" else None
    subject = st.caller.subject("create-task", request_nonce, rail=rail, generation=generation)
    body = st.caller.envelope("create-task", args={"title": "where is my reply"}, request_id=RID)
    if outcome == "refusal":
        body["from"]["id"] = "local.impostor"
    inbox = mesh.nc.new_inbox()

    derived = await mesh.nc.subscribe(st.caller.reply_filter(request_nonce, rail))
    reply_to = await mesh.nc.subscribe(inbox)
    try:
        await mesh.nc.publish(subject, encode(body), reply=inbox)
        msg = await derived.next_msg(timeout=5)
        with pytest.raises(TimeoutError):  # nothing ever arrives on the NATS reply-to
            await reply_to.next_msg(timeout=SILENCE_S)
    finally:
        await derived.unsubscribe()
        await reply_to.unsubscribe()

    s = st.caller.seat
    expected = [
        "cotal",
        SPACE,
        *rail.split("."),
        "reply",
        TOKEN,
        served.instance_id,
        str(served.epoch),
        s.owner,
        s.actor,
        s.lifecycleUid,
        *([generation] if generation is not None else []),
        request_nonce,
    ]
    assert msg.subject.split(".") == expected
    reply = json.loads(msg.data)
    assert reply["id"] == RID
    if outcome == "success":
        assert reply["ok"] is True, reply
        assert reply["data"]["title"] == "where is my reply"
    else:
        assert_refusal(reply, code="sender-mismatch", request_id=RID)
        await assert_unchanged_and_serving(st)
