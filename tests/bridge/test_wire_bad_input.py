"""Bad input on the wire: every refusal a running bridge owes.

The table of refusals runs through the endpoint's real server, envelope, subject and
admission code on a loopback wire (``tests/support/loopback.py``: no nats-server, the
in-memory store), and a few of its rows again over a real bridge through a private
nats-server (the ``mesh`` fixture), as the smoke test that the two agree; the checks that
need the broker's state (the bind fence's describe, lifecycle heads) run there too. For
every refusal the tests check the error code, ``outcome: not-executed``, the echoed id (the
request's, or ``invalid`` when the body carries no usable one), that the board did not move
(same ``changeSeq``, no new task), and that the bridge keeps serving: a good call from the
same caller succeeds after. The silences (subjects that fit no shape, casts) are in
``test_wire_silence``; bounded refusals of hostile values in ``test_wire_bounded``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cotal_tasks.core import Seat
from tests.bridge.wire_support import (
    _DROP,
    BIND_REFUSED,
    RID,
    WORKER,
    ZERO_DIGEST,
    Edit,
    Json,
    Stage,
    answered,
    as_command,
    assert_refusal,
    assert_unchanged_and_serving,
    digests_of,
    edit,
    encode,
    other_instance_id,
    raw,
    read_board,
    stage,
    then,
    with_target,
    wrapped_in_array,
)
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is
from tests.conftest import Clock, seat
from tests.support.bridge import ENDPOINT
from tests.support.cotal import nonce
from tests.support.loopback import loopback_mesh

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


def _on_seed(
    code: str, change: Edit, command: str, mode: str | None = None, target_owner: str | None = None
) -> Case:
    """A call of ``command`` on the staged seed task (its args name it by ``taskId``)."""
    return Case(
        code,
        change,
        command=command,
        args=lambda seed: {"taskId": seed},
        mode=mode,
        target_owner=target_owner,
    )


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
        _on_seed("target-mismatch", edit({}), "bind-task", "owner", WORKER.owner),
    ),
    _case(
        "owner subject with another target owner in the body",
        _on_seed(
            "target-mismatch", with_target(owner="someone_else"), "bind-task", "owner", WORKER.owner
        ),
    ),
    _case(
        "self subject with a body target",
        _on_seed("target-mismatch", with_target(), "claim-task", "self"),
    ),
    # -- verb and class
    _case("class journal on a call", Case("bad-request", edit({"class": "journal"}))),
    _case("class record", Case("bad-request", edit({"class": "record"}))),
    _case("replyExpected missing", Case("bad-request", edit({"replyExpected": _DROP}))),
    _case("replyExpected a string", Case("bad-request", edit({"replyExpected": "false"}))),
    _case("replyExpected null", Case("bad-request", edit({"replyExpected": None}))),
    _case("deadlineMs missing on a call", Case("bad-request", edit({"deadlineMs": _DROP}))),
    _case("deadlineMs zero", Case("bad-request", edit({"deadlineMs": 0}))),
    _case("deadlineMs negative", Case("bad-request", edit({"deadlineMs": -5}))),
    # -- mode admission
    _case("claim-task untargeted", _on_seed("permission-denied", edit({}), "claim-task")),
    _case("create-task in mode self", Case("permission-denied", edit({}), mode="self")),
    _case("bind-task in mode self", _on_seed("permission-denied", edit({}), "bind-task", "self")),
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


# The rows run over the real broker too: one of each kind of check.
OVER_THE_BROKER = (
    "non-json body",
    "v 2",
    "inputDigest missing",
    "from.id not the subject's sender",
    "self subject with a body target",
    "replyExpected null",
    "create-task in mode self",
    "args with an unknown field",
)


@pytest.mark.parametrize("case", CASES)
async def test_a_bad_request_is_refused_before_any_effect(clock: Clock, case: Case) -> None:
    async with loopback_mesh(clock) as mesh:
        await refused_before_any_effect(await stage(mesh), case)


@pytest.mark.parametrize("case", [c for c in CASES if c.id in OVER_THE_BROKER])
async def test_over_the_broker_a_bad_request_is_refused_before_any_effect(
    mesh: Mesh, case: Case
) -> None:
    await refused_before_any_effect(await stage(mesh), case)


def test_every_row_kept_over_the_broker_is_in_the_table() -> None:
    assert set(OVER_THE_BROKER) <= {c.id for c in CASES}


async def refused_before_any_effect(st: Stage, case: Case) -> None:
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
