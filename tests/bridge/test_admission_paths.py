"""Mode admission is one rule on both paths: what the wire admits (its subject and body,
``bridge/wire/admission.py``) and what the service admits of an in-process ``Call``
(``bridge/service/commands.py``) are the same forms with the same codes, both from
``core.commands.mode_refusal``. In process a call's ``target`` is the subject's target, so
mode self names the caller (as the wire's admitted ``Call`` does) or nothing."""

from __future__ import annotations

import pytest

from cotal_tasks.bridge.service.commands import Call, unknown_command
from cotal_tasks.core import ContractError, Mode, Seat
from tests.bridge._support import BOB
from tests.bridge.wire_support import RID, Json, answered, encode, stage
from tests.conftest import Clock, seat
from tests.support.cotal import nonce
from tests.support.loopback import LoopbackMesh, loopback_mesh

SENDER = seat("sender", 1)  # the loopback stage's caller

# (command, mode, target in process, body target on the wire, the code or None: admitted)
FORMS: list[tuple[str, Mode | None, Seat | None, bool, str | None]] = [
    ("claim-task", "self", None, False, None),
    ("claim-task", "self", BOB, True, "target-mismatch"),
    ("claim-task", None, None, False, "permission-denied"),
    ("my-tasks", "self", None, False, None),
    ("my-tasks", "any", BOB, True, "permission-denied"),
    ("list-tasks", "self", None, False, "permission-denied"),
    ("create-task", "self", None, False, "permission-denied"),
    ("bind-task", "self", None, False, "permission-denied"),
]


def args_for(command: str, seed: str) -> Json:
    if command == "create-task":
        return {"title": "never"}
    return {} if command in ("my-tasks", "list-tasks") else {"taskId": seed}


async def on_the_wire(
    mesh: LoopbackMesh, command: str, mode: Mode | None, body: bool
) -> str | None:
    """The code the wire answers (``None``: served), a body target on ``body``."""
    st = await stage(mesh)
    request_nonce = nonce()
    subject = st.caller.subject(command, request_nonce, mode=mode, target_owner=BOB.owner)
    envelope = st.caller.envelope(
        command, args=args_for(command, st.seed), request_id=RID, target=BOB if body else None
    )
    reply = await answered(st.caller, subject, encode(envelope), request_nonce)
    return None if reply["ok"] else str(reply["error"]["code"])


async def in_process(
    mesh: LoopbackMesh, command: str, mode: Mode | None, target: Seat | None
) -> str | None:
    """The code the service answers an in-process ``Call`` (``None``: served)."""
    st = await stage(mesh)
    call = Call(command, SENDER, "in-process-1", args_for(command, st.seed), mode, target)
    try:
        await mesh.server.service.handle(call)
    except ContractError as exc:
        return exc.code.value
    return None


@pytest.mark.parametrize(("command", "mode", "target", "body", "code"), FORMS)
async def test_the_wire_and_the_service_admit_the_same_forms(
    clock: Clock,
    command: str,
    mode: Mode | None,
    target: Seat | None,
    body: bool,
    code: str | None,
) -> None:
    async with loopback_mesh(clock) as mesh:
        assert await on_the_wire(mesh, command, mode, body) == code
    async with loopback_mesh(clock) as mesh:
        assert await in_process(mesh, command, mode, target) == code


async def test_in_process_mode_self_may_name_the_caller_as_the_wire_hands_it_on(
    clock: Clock,
) -> None:
    async with loopback_mesh(clock) as mesh:
        assert await in_process(mesh, "claim-task", "self", SENDER) is None


async def test_a_command_the_contract_lacks_is_refused_in_the_one_wording(clock: Clock) -> None:
    async with loopback_mesh(clock) as mesh:
        with pytest.raises(ContractError) as caught:
            await mesh.server.service.handle(Call("frobnicate-task", SENDER, "e-1", {}))
    expected = unknown_command("frobnicate-task")
    assert (caught.value.code, caught.value.message) == (expected.code, expected.message)
    assert caught.value.outcome == "not-executed"
    assert "Describe lists" in expected.message
