"""What the wire's hot path remembers stays exact: a remembered check never admits a value
the full check refuses, and a refusal is never remembered; an admission remembered for a
subject and an envelope's repeating part still checks what is the request's own (its args,
a body target, its deadline on the scatter rail)."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.bridge.service.commands import Call, NoPresence
from cotal_tasks.bridge.service.metrics import Metrics
from cotal_tasks.bridge.wire import envelope
from cotal_tasks.bridge.wire.admission import Admission, contracts
from cotal_tasks.bridge.wire.instance import InstanceIdentity
from cotal_tasks.bridge.wire.subjects import RequestSubject, parse_request
from cotal_tasks.core import ContractError, ErrorCode, contract_artifacts

ENDPOINT = "com.example.remembered"
IID = "a" * 26
HEAD = "cotal.demo.ep.one.com_example_remembered.get-task.local.seat." + "0" * 26
ALL = HEAD.replace(".ep.one.", ".ep.all.")


def body(**changes: Any) -> dict[str, Any]:
    artifacts = contract_artifacts()
    value: dict[str, Any] = {
        "v": 1,
        "id": "request-1",
        "op": {
            "endpoint": ENDPOINT,
            "command": "get-task",
            "inputDigest": artifacts.inputs["get-task"].digest,
            "outputDigest": artifacts.outputs["get-task"].digest,
        },
        "class": "ephemeral",
        "replyExpected": True,
        "deadlineMs": 1000,
        "from": {"id": "local.seat", "name": "seat"},  # the principal of HEAD's caller
        "args": {"taskId": "t-1"},
        "bind": {"instanceId": IID, "epoch": 1},
    }
    value.update(changes)
    return {k: v for k, v in value.items() if v is not None}


def refused(raw: dict[str, Any]) -> ErrorCode:
    with pytest.raises(ContractError) as caught:
        envelope.parse_request(raw)
    return caught.value.code


@pytest.mark.parametrize("epoch", [True, 1.0, -1, "1"])
def test_a_remembered_bind_does_not_admit_a_lookalike_epoch(epoch: Any) -> None:
    assert envelope.parse_request(body()).bind == envelope.Bind(IID, 1)
    assert refused(body(bind={"instanceId": IID, "epoch": epoch})) == ErrorCode.BAD_REQUEST
    assert envelope.parse_request(body()).bind == envelope.Bind(IID, 1)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"replyExpected": 1}, ErrorCode.BAD_REQUEST),
        ({"class": "journal"}, ErrorCode.BAD_REQUEST),
        ({"from": {"id": "local/seat/" + "0" * 26, "name": ""}}, ErrorCode.BAD_REQUEST),
        ({"bind": {"instanceId": IID, "epoch": 1.5}}, ErrorCode.BAD_REQUEST),
    ],
)
def test_a_remembered_envelope_does_not_admit_a_lookalike(
    changes: dict[str, Any], code: ErrorCode
) -> None:
    assert envelope.parse_request(body()).reply_expected is True
    assert refused(body(**changes)) == code
    assert envelope.parse_request(body()).bind == envelope.Bind(IID, 1)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"v": True}, ErrorCode.UNSUPPORTED_VERSION),
        ({"id": "no spaces"}, ErrorCode.BAD_REQUEST),
        ({"deadlineMs": 0}, ErrorCode.BAD_REQUEST),
        ({"deadlineMs": None}, ErrorCode.BAD_REQUEST),
        ({"target": {"owner": "local"}}, ErrorCode.BAD_REQUEST),
        ({"args": ["t-1"]}, ErrorCode.BAD_REQUEST),
        # the first refusal in check order: the version before the id before the args
        ({"v": 2, "id": "", "args": []}, ErrorCode.UNSUPPORTED_VERSION),
    ],
)
def test_what_varies_is_checked_even_when_the_rest_is_remembered(
    changes: dict[str, Any], code: ErrorCode
) -> None:
    envelope.parse_request(body())  # the repeating part is remembered now
    assert refused(body(**changes)) == code
    request = envelope.parse_request(body(id="request-2", deadlineMs=5, args={"taskId": "t-2"}))
    assert (request.id, request.deadline_ms, request.args) == ("request-2", 5, {"taskId": "t-2"})


def test_a_refused_op_is_refused_every_time() -> None:
    op = {**body()["op"], "inputDigest": "sha256:" + "Z" * 64}
    assert refused(body(op=op)) == ErrorCode.BAD_REQUEST
    assert refused(body(op=op)) == ErrorCode.BAD_REQUEST
    assert refused(body(op={**op, "inputDigest": None})) == ErrorCode.CONTRACT_MISMATCH


def test_the_endpoint_token_comes_with_the_parsed_op() -> None:
    assert envelope.parse_request(body()).endpoint_token == "com_example_remembered"


def test_long_and_odd_values_are_checked_without_being_remembered() -> None:
    long_name = "n" * 10_000
    request = envelope.parse_request(body(**{"from": {"id": "x", "name": long_name}}))
    assert request.from_id == "x"
    assert refused(body(**{"from": {"id": "x", "name": ["n"]}})) == ErrorCode.BAD_REQUEST
    assert refused(body(**{"from": {"id": "", "name": "n"}})) == ErrorCode.BAD_REQUEST


def test_a_remembered_subject_head_still_checks_each_nonce() -> None:
    first = parse_request(f"{HEAD}.{'n' * 22}", "demo")
    second = parse_request(f"{HEAD}.{'m' * 22}", "demo")
    assert first is not None
    assert second is not None
    assert (first.nonce, second.nonce) == ("n" * 22, "m" * 22)
    assert first.caller == second.caller
    assert parse_request(f"{HEAD}.short", "demo") is None
    assert parse_request(f"{HEAD}.{'n' * 22}", "other") is None
    assert parse_request(f"{HEAD}.{'n' * 22}" + "x" * 2000, "demo") is None


def test_served_latency_lands_in_the_bucket_its_bound_names() -> None:
    metrics = Metrics()
    for seconds in (0.001, 0.0011, 10.0):
        metrics.command_served("e", "get-task", "ok", seconds)
    text = metrics.render().decode()
    series = 'command="get-task",endpoint="e"'
    assert f'cotal_tasks_command_seconds_bucket{{{series},le="0.001",transport="wire"}} 1.0' in text
    assert (
        f'cotal_tasks_command_seconds_bucket{{{series},le="0.0025",transport="wire"}} 2.0' in text
    )
    assert f'cotal_tasks_command_seconds_bucket{{{series},le="+Inf",transport="wire"}} 3.0' in text
    assert f'cotal_tasks_commands_total{{code="ok",{series},transport="wire"}} 3.0' in text


def admission() -> Admission:
    return Admission(ENDPOINT, InstanceIdentity(IID, 1), NoPresence(), None, "none", contracts())


def subject(head: str = HEAD, nonce: str = "n" * 22) -> RequestSubject:
    parsed = parse_request(f"{head}.{nonce}", "demo")
    assert parsed is not None
    return parsed


def admitted(checks: Admission, raw: dict[str, Any], head: str = HEAD) -> Call:
    call = checks.admitted(subject(head), envelope.parse_request(raw))
    assert isinstance(call, Call)
    return call


def refusal(checks: Admission, raw: dict[str, Any], head: str = HEAD) -> ContractError:
    with pytest.raises(ContractError) as caught:
        admitted(checks, raw, head)
    return caught.value


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"args": {"taskId": 5}}, ErrorCode.BAD_REQUEST),
        ({"args": {}}, ErrorCode.BAD_REQUEST),
        (
            {"target": {"owner": "local", "actor": "seat", "lifecycleUid": "0" * 26}},
            ErrorCode.TARGET_MISMATCH,
        ),
        ({"from": {"id": "local.other", "name": "seat"}}, ErrorCode.SENDER_MISMATCH),
        ({"bind": {"instanceId": IID, "epoch": 2}}, ErrorCode.EXPIRED),  # a restart since
        ({"bind": {"instanceId": "c" * 26, "epoch": 1}}, ErrorCode.FAILED_PRECONDITION),
    ],
)
def test_a_remembered_admission_still_checks_what_is_the_requests_own(
    changes: dict[str, Any], code: ErrorCode
) -> None:
    checks = admission()
    for n in range(2):  # the second is admitted from what the first left remembered
        call = admitted(checks, body(id=f"first-{n}", args={"taskId": f"t-{n}"}))
        assert (call.envelope_id, call.args) == (f"first-{n}", {"taskId": f"t-{n}"})
        assert call.admitted is not None
        assert call.admitted.model_dump() == {"taskId": f"t-{n}"}
    refused = refusal(checks, body(**changes))
    assert (refused.code, refused.outcome) == (code, "not-executed")
    assert admitted(checks, body(id="after")).envelope_id == "after"


def test_the_scatter_rail_still_needs_a_deadline_once_its_subject_is_remembered() -> None:
    checks = admission()
    cast = body(replyExpected=False, bind=None)
    assert admitted(checks, cast, ALL).envelope_id == "request-1"
    assert admitted(checks, cast, ALL).envelope_id == "request-1"
    refused = refusal(checks, body(replyExpected=False, bind=None, deadlineMs=None), ALL)
    assert (refused.code, refused.outcome) == (ErrorCode.BAD_REQUEST, "not-executed")
    assert "scatter rail" in refused.message
