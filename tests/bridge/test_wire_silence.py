"""What the bridge never answers, and where it does answer.

A subject that fits no request shape is never handled or answered; a cast
(``replyExpected: false``) is never answered, whether it succeeds, fails after its
envelope parsed, or carries an envelope that does not parse at all (the verb is read
first). Every reply goes to the subject derived from the request, never to a NATS
reply-to.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from tests.bridge.wire_support import (
    _DROP,
    PREFIX,
    REPLY_RAILS,
    RID,
    SILENCE_S,
    TOKEN,
    WORKER,
    ZERO_DIGEST,
    Edit,
    Json,
    Stage,
    answered,
    assert_all_silent,
    assert_refusal,
    assert_unchanged_and_serving,
    deep,
    edit,
    encode,
    other_instance_id,
    payload,
    read_board,
    send,
    stage,
    watching,
)
from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is
from tests.support.bridge import SPACE
from tests.support.cotal import TestCaller, nonce

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
    sends = [
        (what, subject, encode(st.caller.envelope("create-task", args={"title": what})), n)
        for what, subject, n in malformed_subjects(st.caller, other_instance_id(st.bound))
    ]
    await assert_all_silent(st, sends)
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
    n = nonce()
    journal = cast("create-task", {"title": "cast: journal"})
    journal["class"] = "journal"  # deadlineMs stays: a journal submission needs one
    yield "a journal-class submission", st.caller.subject("create-task", n), journal


async def test_a_cast_that_fails_stays_silent(mesh: Mesh) -> None:
    st = await stage(mesh)
    sends = [
        (what, subject, encode(body), subject.rsplit(".", 1)[1])
        for what, subject, body in _cast_errors(st)
    ]
    await assert_all_silent(st, sends)
    assert (await st.auditor.ok("get-task", {"taskId": st.seed})).get("binding") is None
    await assert_unchanged_and_serving(st)


MALFORMED_CASTS: dict[str, Edit] = {
    "v 2": edit({"v": 2}),
    "v missing": edit({"v": _DROP}),
    "id missing": edit({"id": _DROP}),
    "id not a token": edit({"id": "has space"}),
    "op not an object": edit({"op": "create-task"}),
    "op.endpoint not a name": edit({"op.endpoint": "Not An Endpoint"}),
    "op.command not a token": edit({"op.command": "Create Task"}),
    "inputDigest missing": edit({"op.inputDigest": _DROP}),
    "outputDigest malformed": edit({"op.outputDigest": "sha256:xyz"}),
    "class record": edit({"class": "record"}),
    "deadlineMs zero": edit({"deadlineMs": 0}),
    "target not an object": edit({"target": ["local", "worker"]}),
    "target.actor not a token": edit(
        {"target": {"owner": "local", "actor": "not a token", "lifecycleUid": WORKER.lifecycleUid}}
    ),
    "bind without an epoch": edit({"bind.epoch": _DROP}),
    "args not an object": edit({"args": ["title"]}),
    "from missing": edit({"from": _DROP}),
    "a huge id of backslashes": edit({"id": "\\" * 500_000}),
    "class nested 1,000 deep": deep("class"),
    "v nested 1,000 deep": deep("v"),
}


async def test_a_malformed_cast_stays_silent(mesh: Mesh) -> None:
    """The verb is read first: a body that says ``replyExpected: false`` is a cast and is
    never answered, whatever else in its envelope is refused."""
    st = await stage(mesh)

    sends = []
    for what, change in MALFORMED_CASTS.items():
        request_nonce = nonce()
        body = st.caller.envelope("create-task", args={"title": what}, reply_expected=False)
        subject = st.caller.subject("create-task", request_nonce)
        sends.append((what, subject, payload(change(body, st.bound)), request_nonce))
    await assert_all_silent(st, sends)
    await assert_unchanged_and_serving(st)


async def test_the_same_malformed_body_as_a_call_is_answered(mesh: Mesh) -> None:
    """The contrast: only the verb decides the silence, not the defect."""
    st = await stage(mesh)
    request_nonce = nonce()
    body = st.caller.envelope("create-task", args={"title": "call"}, request_id=RID)
    del body["op"]["inputDigest"]
    reply = await answered(
        st.caller, st.caller.subject("create-task", request_nonce), encode(body), request_nonce
    )
    assert_refusal(reply, code="contract-mismatch", request_id=RID)
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
