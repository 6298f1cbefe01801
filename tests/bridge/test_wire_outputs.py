"""Every answer the bridge builds fits the output schema it publishes.

The server does not check its own answers against the output schema on the hot path (they
are built from validated models or the board's stored, validated wire form); this holds
the replies of every command, read from the wire, to the schema in the published contract.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from tests.conformance.conftest import Mesh
from tests.conformance.conftest import mesh as mesh  # the fixture, reused as is
from tests.support.cotal import TestCaller


async def _published_output(caller: TestCaller, command: str) -> Draft202012Validator:
    assert caller.bound is not None
    manifest = await caller.artifact(caller.bound.row(command)["outputDigest"])
    schema = await caller.artifact(manifest["root"])  # the digest names a manifest
    return Draft202012Validator(schema)


async def test_every_command_reply_fits_its_published_output_schema(mesh: Mesh) -> None:
    caller = mesh.caller("worker")
    operator = mesh.caller("operator")
    await mesh.space.present(caller.seat)
    answers: list[tuple[str, Any]] = []

    async def ok(who: TestCaller, command: str, args: dict[str, Any], **kw: Any) -> Any:
        data = await who.ok(command, args, **kw)
        answers.append((command, data))
        return data

    created = await ok(caller, "create-task", {"title": "fits", "brief": "a brief ☕"})
    task_id = created["taskId"]
    evidence = [{"kind": "commit", "ref": "9f2c1e7"}]
    second = await ok(caller, "create-task", {"title": "second", "evidence": evidence})
    await ok(caller, "get-task", {"taskId": task_id})
    await ok(caller, "list-tasks", {"limit": 1})
    await ok(caller, "list-tasks", {})
    await ok(caller, "claim-task", {"taskId": task_id}, mode="self")
    await ok(caller, "my-tasks", {}, mode="self")
    await ok(caller, "get-task", {"taskId": task_id})  # bound, from the read cache
    await ok(
        caller,
        "update-task",
        {"taskId": task_id, "status": "done", "evidence": [{"kind": "commit", "ref": "abc1234"}]},
        mode="self",
    )
    await ok(operator, "administer-task", {"taskId": task_id, "status": "dropped", "note": "n"})
    await mesh.space.activate(caller.seat)
    await ok(
        operator,
        "bind-task",
        {"taskId": second["taskId"], "expectedBinding": None},
        mode="owner",
        target=caller.seat,
    )
    await ok(caller, "list-tasks", {"status": ["done"]})
    assert {command for command, _ in answers} == {
        "create-task",
        "get-task",
        "list-tasks",
        "claim-task",
        "my-tasks",
        "update-task",
        "administer-task",
        "bind-task",
    }
    for command, data in answers:
        validator = await _published_output(caller, command)
        assert not validator.is_valid({}), command  # the schema is the real one, not empty
        errors = [e.message for e in validator.iter_errors(data)]
        assert not errors, (command, errors, data)
