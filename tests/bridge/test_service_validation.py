"""A call's args are validated once: ``parse_args`` is the one validation, its refusal is the
message every transport sends, and a call a transport has already admitted and parsed
(``Call.admitted``) is not admitted or validated again."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cotal_tasks.bridge.service.commands import Call
from cotal_tasks.bridge.service.validation import parse_args
from cotal_tasks.core import COMMANDS, ContractError, CreateTaskInput, ErrorCode, GetTaskInput
from tests.bridge._support import OPERATOR, Client
from tests.conftest import seat

ALICE = seat("alice", 1)
SECRET = "ghp_" + "s" * 36


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("create-task", {"title": SECRET, "status": "claimed"}),
        ("create-task", {"title": 7}),
        ("get-task", {"taskId": "t-1", "extra": SECRET}),
        ("list-tasks", {"limit": 0}),
    ],
)
def test_a_refusal_is_bad_request_naming_the_field_never_the_value(
    command: str, args: dict[str, Any]
) -> None:
    with pytest.raises(ContractError) as caught:
        parse_args(COMMANDS[command], args)
    error = caught.value
    assert error.code is ErrorCode.BAD_REQUEST
    assert error.message.startswith(f"{command} args refused: args.")
    assert SECRET not in error.message
    assert re.search(r"\. [A-Z]", error.message), error.message  # and names the remedy


def test_deep_args_are_refused_not_crashed() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = {"a": deep}
    with pytest.raises(ContractError) as caught:
        parse_args(COMMANDS["create-task"], {"title": "t", "brief": deep})
    assert caught.value.code is ErrorCode.BAD_REQUEST


async def test_the_service_and_a_transport_refuse_with_the_same_message(client: Client) -> None:
    args = {"title": "x", "status": "blocked"}
    refused = await client.refused(ErrorCode.BAD_REQUEST, "create-task", OPERATOR, args)
    with pytest.raises(ContractError) as parsed:
        parse_args(COMMANDS["create-task"], args)  # what the wire's admission raises
    assert refused.message == parsed.value.message


async def test_an_admitted_call_is_served_from_its_parsed_input(client: Client) -> None:
    parsed = parse_args(COMMANDS["create-task"], {"title": "parsed once"})
    assert isinstance(parsed, CreateTaskInput)
    # The raw args are not looked at again: the call carries none.
    call = Call("create-task", OPERATOR, "admitted-1", None, admitted=parsed)
    task = await client.service.handle(call)
    assert task["title"] == "parsed once"
    read = Call("get-task", OPERATOR, "admitted-2", admitted=GetTaskInput(taskId=task["taskId"]))
    assert await client.service.handle(read) == task


async def test_a_call_without_a_parsed_input_is_still_admitted(client: Client) -> None:
    # No transport admitted it: the service refuses the mode itself.
    task = await client.create()
    refused = await client.refused(
        ErrorCode.PERMISSION_DENIED, "claim-task", ALICE, {"taskId": task["taskId"]}
    )
    assert "claim-task" in refused.message


def test_a_read_is_parsed_once_per_distinct_args_and_a_refusal_every_time() -> None:
    spec = COMMANDS["get-task"]
    first = parse_args(spec, {"taskId": "t-remembered"})
    assert parse_args(spec, {"taskId": "t-remembered"}) is first
    assert parse_args(spec, {"taskId": "t-other"}) is not first
    for _ in range(2):
        with pytest.raises(ContractError):
            parse_args(spec, {"taskId": "t-remembered", "limit": 1})
    create = COMMANDS["create-task"]
    assert parse_args(create, {"title": "x"}) is not parse_args(create, {"title": "x"})


def test_missing_args_are_refused_with_a_remedy() -> None:
    with pytest.raises(ContractError) as caught:
        parse_args(COMMANDS["list-tasks"], None)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert caught.value.message == (
        "list-tasks args are missing. Send a JSON object (an empty one when nothing is set)"
    )
