"""Seat identity, the Cotal token grammars, and the error catalog."""

from __future__ import annotations

import re

import pytest

from cotal_tasks.core import ContractError, ErrorCode, Seat, endpoint_token, space_token
from cotal_tasks.core.identity import (
    COMMAND_TOKEN,
    GENERATION,
    ID_TOKEN,
    INSTANCE_ID,
    LIFECYCLE_UID,
    NONCE,
    OWNER_OR_ACTOR,
)

UID = "01hx5v2k8m3n4p5q6r7s8t9v0w"  # 26 characters of [a-z0-9]


# --- Seat -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    ["a", "Z", "0", "_", "local", "u_abcdefghijklmnopqrstuvwxyz", "A" * 64, "Mixed_Case_09"],
)
def test_owner_and_actor_tokens_admitted(token: str) -> None:
    seat = Seat(token, token, UID)
    assert seat.owner == seat.actor == token


@pytest.mark.parametrize(
    "token",
    ["", "A" * 65, "acme-co", "acme.co", "acme co", "é", "acme\n", "a/b", "a*", ">"],
)
@pytest.mark.parametrize("role", ["owner", "actor"])
def test_owner_and_actor_tokens_refused(token: str, role: str) -> None:
    owner, actor = (token, "builder") if role == "owner" else ("acme", token)
    with pytest.raises(ContractError) as caught:
        Seat(owner, actor, UID)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert f"seat {role}" in caught.value.message
    assert "[A-Za-z0-9_], 1 to 64 characters" in caught.value.message


@pytest.mark.parametrize("uid", ["a" * 26, "0" * 32, "abc123" * 5, UID])
def test_lifecycle_uid_admitted(uid: str) -> None:
    assert Seat("acme", "builder", uid).lifecycleUid == uid


@pytest.mark.parametrize(
    "uid",
    ["a" * 25, "a" * 33, "A" * 26, "a" * 25 + "-", "a" * 25 + "_", "", "a" * 26 + "\n", "é" * 26],
)
def test_lifecycle_uid_refused(uid: str) -> None:
    with pytest.raises(ContractError) as caught:
        Seat("acme", "builder", uid)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "26 to 32 characters of [a-z0-9]" in caught.value.message


def test_seat_principal_and_text_form() -> None:
    seat = Seat("acme", "builder", UID)
    assert seat.principal == "acme.builder"
    assert str(seat) == f"acme.builder/{UID}"
    assert Seat.parse(str(seat)) == seat


def test_seat_parse() -> None:
    assert Seat.parse(f"local.census/{UID}") == Seat("local", "census", UID)


def test_seats_compare_by_the_whole_triple() -> None:
    assert Seat("acme", "builder", UID) == Seat("acme", "builder", UID)
    assert Seat("acme", "builder", UID) != Seat("acme", "builder", "b" * 26)
    assert hash(Seat("acme", "builder", UID)) == hash(Seat("acme", "builder", UID))


def test_seat_is_frozen() -> None:
    seat = Seat("acme", "builder", UID)
    with pytest.raises(AttributeError):
        seat.owner = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("acme.builder", "is not OWNER.ACTOR/LIFECYCLE_UID"),
        (f"acme/{UID}", "is not OWNER.ACTOR/LIFECYCLE_UID"),
        ("", "is not OWNER.ACTOR/LIFECYCLE_UID"),
        (f"acme.builder.x/{UID}", "seat actor"),  # the actor would be 'builder.x'
        (f".builder/{UID}", "seat owner"),
        (f"acme./{UID}", "seat actor"),
        ("acme.builder/", "lifecycle uid"),
        ("acme.builder/UPPERCASEUIDUPPERCASEUIDXX", "lifecycle uid"),
        (f"acme.builder/{UID}/extra", "lifecycle uid"),
    ],
)
def test_seat_parse_refusals(text: str, fragment: str) -> None:
    with pytest.raises(ContractError) as caught:
        Seat.parse(text)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert fragment in caught.value.message


# --- the other token grammars of reference/cotal-wire.md §1 -----------------------------


@pytest.mark.parametrize(
    ("grammar", "admitted", "refused"),
    [
        (OWNER_OR_ACTOR, ["a", "u_" + "a" * 26, "X" * 64], ["", "a-b", "a.b", "X" * 65]),
        (LIFECYCLE_UID, ["a" * 26, "0" * 32], ["a" * 25, "a" * 33, "A" * 26]),
        (INSTANCE_ID, ["a" * 26, "0" * 32], ["a" * 25, "a-" * 13]),
        (COMMAND_TOKEN, ["list-tasks", "a", "a" * 32], ["", "a" * 33, "List", "a_b", "a.b"]),
        (NONCE, ["a" * 22, "A-_" * 21 + "x"], ["a" * 21, "a" * 65, "a.b" * 10]),
        (ID_TOKEN, ["a", "c-1", "A_z-9" * 12 + "abcd"], ["", "a" * 65, "a.b", "a b"]),
        (
            GENERATION,
            ["0123456789abcdef" * 2],
            ["0123456789ABCDEF" * 2, "0" * 31, "0" * 33, "g" * 32],
        ),
    ],
)
def test_token_grammar(grammar: re.Pattern[str], admitted: list[str], refused: list[str]) -> None:
    for token in admitted:
        assert grammar.fullmatch(token), token
    for token in [*refused, *(t + "\n" for t in admitted)]:
        assert grammar.fullmatch(token) is None, token


# --- endpoint and space tokens -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "token"),
    [
        ("com.acme.tasks", "com_acme_tasks"),
        ("tasks", "tasks"),
        ("my-co.tasks-1", "my-co_tasks-1"),
        ("a.b.c.d", "a_b_c_d"),
        ("0.9", "0_9"),
        ("a" * 64, "a" * 64),
        ("a" * 31 + "." + "b" * 32, "a" * 31 + "_" + "b" * 32),
    ],
)
def test_endpoint_token(name: str, token: str) -> None:
    assert endpoint_token(name) == token
    assert len(token) <= 64


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Com.acme.tasks",
        "com.ACME",
        "-acme.tasks",
        "acme-.tasks",
        "acme..tasks",
        ".acme",
        "acme.",
        "acme_co.tasks",
        "acme co.tasks",
        "acmé.tasks",
        "acme.tasks\n",
        "acme/tasks",
    ],
)
def test_endpoint_token_refuses_bad_labels(name: str) -> None:
    with pytest.raises(ContractError) as caught:
        endpoint_token(name)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "for example com.acme.tasks" in caught.value.message


@pytest.mark.parametrize("name", ["a" * 65, "a" * 32 + "." + "b" * 32, "x." * 32 + "y"])
def test_endpoint_token_refuses_more_than_64_characters(name: str) -> None:
    with pytest.raises(ContractError) as caught:
        endpoint_token(name)
    assert caught.value.code is ErrorCode.BAD_REQUEST
    assert "Keep it within 64" in caught.value.message
    assert f"{len(name)}-character token" in caught.value.message


@pytest.mark.parametrize(
    ("space", "token"),
    [
        ("team-alpha_1", "team-alpha_1"),
        ("team.alpha", "team_alpha"),
        ("a b/c", "a_b_c"),
        ("café", "caf_"),
        ("a*b>c", "a_b_c"),
        ("", ""),
    ],
)
def test_space_token(space: str, token: str) -> None:
    assert space_token(space) == token


# --- the error catalog ------------------------------------------------------------------

# EP_ERROR_CODES as listed in reference/cotal-wire.md §3 (endpoint-error.ts), in order.
EP_ERROR_CODES = [
    "bad-request",
    "unsupported-version",
    "op-mismatch",
    "class-mismatch",
    "target-mismatch",
    "sender-mismatch",
    "unauthenticated",
    "permission-denied",
    "not-found",
    "already-exists",
    "conflict",
    "contract-mismatch",
    "contract-invalid",
    "failed-precondition",
    "deadline-exceeded",
    "cancelled",
    "expired",
    "unavailable",
    "unimplemented",
    "resource-exhausted",
    "internal",
]


def test_error_code_is_exactly_ep_error_codes() -> None:
    assert len(EP_ERROR_CODES) == 21
    assert [code.value for code in ErrorCode] == EP_ERROR_CODES


def test_error_codes_are_strings_on_the_wire() -> None:
    assert isinstance(ErrorCode.PERMISSION_DENIED, str)
    assert str(ErrorCode.PERMISSION_DENIED) == "permission-denied"
    assert f"{ErrorCode.CONFLICT}" == "conflict"
    assert ErrorCode("failed-precondition") is ErrorCode.FAILED_PRECONDITION
    with pytest.raises(ValueError, match="not a valid ErrorCode"):
        ErrorCode("forbidden")


@pytest.mark.parametrize("code", list(ErrorCode))
def test_a_contract_error_carries_its_code_and_message(code: ErrorCode) -> None:
    error = ContractError(code, "what happened. What to do")
    assert error.code is code
    assert error.message == "what happened. What to do"
    assert str(error) == f"{code.value}: what happened. What to do"
    assert error.outcome is None
    assert error.details == ()


def test_with_outcome_keeps_an_outcome_already_known() -> None:
    error = ContractError(ErrorCode.UNAVAILABLE, "store is down; retry")
    assert error.with_outcome("not-executed") is error
    assert error.outcome == "not-executed"
    assert error.with_outcome("executed").outcome == "not-executed"
    known = ContractError(ErrorCode.INTERNAL, "boom; report it", outcome="unknown")
    assert known.with_outcome("executed").outcome == "unknown"


def test_contract_error_carries_details() -> None:
    details = ({"kind": "ai.cotal.ep.bind-refused", "endpoint": "com.acme.tasks"},)
    error = ContractError(ErrorCode.CONFLICT, "moved; re-resolve", details=details)
    assert error.details == details
