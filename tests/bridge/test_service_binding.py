"""Binding identity over the real board (SQLite and PostgreSQL): the lifecycle-uid
rules of section 3, the three environment outcomes of section 2 read from a seat's
presence card, and the optional reachability check (``require_presence``)."""

from __future__ import annotations

import pytest

from cotal_tasks.core import ErrorCode
from cotal_tasks.providers.store import TaskStore
from tests.bridge._support import (
    ALICE,
    ALICE_REBORN,
    BOB,
    OPERATOR,
    Client,
    DictPresence,
    Json,
    bound_triple,
    triple,
)
from tests.conftest import Clock, seat

# Section 3: a new lifecycle uid is a different seat.


async def test_a_new_incarnation_cannot_touch_the_old_binding(client: Client) -> None:
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    await client.refused_update(ErrorCode.PERMISSION_DENIED, ALICE_REBORN, task_id, status="done")
    await client.refused_claim(ErrorCode.CONFLICT, ALICE_REBORN, task_id)
    assert (await client.my_tasks(ALICE_REBORN))["tasks"] == []
    task = await client.get(task_id)
    assert task == claimed
    assert task["binding"]["lifecycleUid"] == ALICE.lifecycleUid
    assert [t["taskId"] for t in (await client.my_tasks(ALICE))["tasks"]] == [task_id]


# Section 2 and 3: the environment outcomes and the optional reachability check.

ADMITTED_ENVIRONMENTS = [
    "env:builder-7",
    "https://hosted.example/envs/e-42?region=eu",
    "wörkspace α/β 7",
    "x" * 2048,
]
REFUSED_ENVIRONMENTS = [
    "https://user:pw@hosted.example/envs/e-42",
    "https://hosted.example/envs?token=abc",
    "Bearer abc.def",
    "line\nbreak",
    "x" * 2049,
]


def short(environment: str) -> str:
    """A test id for an environment: a long one by its length."""
    return environment if len(environment) <= 64 else f"{len(environment)} characters"


async def bind_with_card(client: Client, presence: DictPresence, environment: str) -> Json:
    """Bind a seat whose fresh card carries ``environment``; the task as bound and stored."""
    who = seat("env", 1)
    presence.put(who, environment=environment)
    task_id = (await client.create())["taskId"]
    bound = await client.bind(who, task_id)
    assert bound["status"] == "claimed"
    assert bound_triple(bound) == triple(who)
    assert (await client.get(task_id))["binding"] == bound["binding"]
    return bound


@pytest.mark.parametrize("environment", ADMITTED_ENVIRONMENTS, ids=short)
async def test_bind_records_an_admitted_environment_verbatim(
    client: Client, presence: DictPresence, environment: str
) -> None:
    binding = (await bind_with_card(client, presence, environment))["binding"]
    assert binding["environment"].encode() == environment.encode()
    assert "environmentWithheld" not in binding


@pytest.mark.parametrize(
    "card",
    [
        pytest.param(None, id="no-card"),
        pytest.param((None, True, None), id="card-without-environment"),
        pytest.param(("env:old", True, "9" * 26), id="card-of-another-incarnation"),
        pytest.param(("env:stale", False, None), id="card-not-fresh"),
    ],
)
async def test_bind_without_a_current_environment_omits_both_fields(
    client: Client,
    presence: DictPresence,
    card: tuple[str | None, bool, str | None] | None,
) -> None:
    if card is not None:
        presence.put(ALICE, environment=card[0], fresh=card[1], lifecycle_uid=card[2])
    task_id = (await client.create())["taskId"]
    bound = await client.bind(ALICE, task_id)
    assert set(bound["binding"]) == {"owner", "actor", "lifecycleUid", "boundAt", "boundBy"}
    assert bound["binding"]["boundBy"] == OPERATOR.principal


@pytest.mark.parametrize("environment", REFUSED_ENVIRONMENTS, ids=short)
async def test_bind_withholds_a_refused_environment_and_still_binds(
    client: Client, presence: DictPresence, environment: str
) -> None:
    binding = (await bind_with_card(client, presence, environment))["binding"]
    assert binding["environmentWithheld"] is True
    assert "environment" not in binding


async def test_claim_reads_the_callers_own_card(client: Client, presence: DictPresence) -> None:
    presence.put(ALICE, environment="env:alice")
    presence.put(BOB, environment="env:bob")
    task_id = (await client.create())["taskId"]
    claimed = await client.claim(ALICE, task_id)
    assert claimed["binding"]["environment"] == "env:alice"
    assert presence.lookups == [("local", "alice")]


@pytest.mark.parametrize(
    "card",
    [
        pytest.param(None, id="no-card"),
        pytest.param((True, "9" * 26), id="other-lifecycle-uid"),
        pytest.param((False, None), id="not-fresh"),
    ],
)
async def test_require_presence_refuses_a_target_without_a_fresh_matching_card(
    store: TaskStore, clock: Clock, card: tuple[bool, str | None] | None
) -> None:
    presence = DictPresence()
    if card is not None:
        presence.put(ALICE, environment="env:a", fresh=card[0], lifecycle_uid=card[1])
    client = Client.over(store, clock, presence=presence, require_presence=True)
    task = await client.create()
    seq = await client.change_seq()
    await client.refused_bind(ErrorCode.FAILED_PRECONDITION, ALICE, task["taskId"])
    await client.refused_claim(ErrorCode.FAILED_PRECONDITION, ALICE, task["taskId"])
    assert await client.get(task["taskId"]) == task
    assert await client.change_seq() == seq


async def test_require_presence_binds_a_target_with_a_fresh_matching_card(
    store: TaskStore, clock: Clock
) -> None:
    presence = DictPresence()
    presence.put(ALICE, environment="env:a")
    client = Client.over(store, clock, presence=presence, require_presence=True)
    task_id = (await client.create())["taskId"]
    bound = await client.bind(ALICE, task_id)
    assert bound["binding"]["environment"] == "env:a"
