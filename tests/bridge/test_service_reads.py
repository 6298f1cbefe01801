"""The three read commands over every store (memory, SQLite, PostgreSQL), the board feed's
page of records, and mode admission before anything runs. Paging is in
``test_service_paging.py``; the section 4 rule that unreadable, stale and empty are three
different answers in ``test_service_unreadable.py``."""

from __future__ import annotations

from typing import Any

import pytest

from cotal_tasks.bridge.service.commands import CommandService
from cotal_tasks.core import ContractError, ErrorCode, Mode, Seat, TaskPage
from tests.bridge._support import ALICE, BOB, OPERATOR, PAGE_KEYS, Client, DictPresence
from tests.conftest import Clock, seat

# get-task


async def test_get_task_returns_the_full_record(client: Client) -> None:
    created = await client.create(
        "Write the runbook", brief="Cover restores.", evidence=[{"kind": "run", "ref": "r-1"}]
    )
    assert await client.get(created["taskId"]) == created


async def test_get_task_of_an_absent_id_is_not_found(client: Client) -> None:
    await client.create()
    error = await client.refused(ErrorCode.NOT_FOUND, "get-task", OPERATOR, {"taskId": "t-absent"})
    assert "t-absent" in error.message


@pytest.mark.parametrize(
    "args",
    [{}, {"taskId": ""}, {"taskId": "x" * 129}, {"taskId": 7}, {"taskId": "t-1", "extra": 1}],
)
async def test_get_task_refuses_malformed_args(client: Client, args: dict[str, Any]) -> None:
    await client.refused(ErrorCode.BAD_REQUEST, "get-task", OPERATOR, args)


# list-tasks and my-tasks


async def test_list_tasks_on_an_empty_board_is_a_positive_empty_page(
    client: Client, clock: Clock
) -> None:
    page = await client.list_tasks()
    assert page == {"tasks": [], "appliedLimit": 100, "observedAt": clock.ms, "changeSeq": 0}
    assert "stale" not in page
    assert "nextCursor" not in page


async def test_list_tasks_carries_summaries_in_creation_order(client: Client) -> None:
    first = await client.create("one", brief="b", evidence=[{"kind": "commit", "ref": "c"}])
    second = await client.create("two")
    page = await client.list_tasks()
    assert set(page) == PAGE_KEYS
    assert [t["taskId"] for t in page["tasks"]] == [first["taskId"], second["taskId"]]
    summary = page["tasks"][0]
    assert "brief" not in summary
    assert "evidence" not in summary
    assert summary == {k: v for k, v in first.items() if k not in ("brief", "evidence")}
    assert page["changeSeq"] == 2


async def test_my_tasks_lists_only_the_callers_bound_tasks(client: Client) -> None:
    mine_open = (await client.create("a"))["taskId"]
    mine_done = (await client.create("b"))["taskId"]
    bobs = (await client.create("c"))["taskId"]
    await client.create("unbound")
    freed = (await client.create("d"))["taskId"]
    for task_id in (mine_open, mine_done, freed):
        await client.claim(ALICE, task_id)
    await client.claim(BOB, bobs)
    await client.update(ALICE, mine_done, status="done")
    await client.administer(freed, unbind=True)

    page = await client.my_tasks(ALICE)
    assert set(page) == PAGE_KEYS
    assert [t["taskId"] for t in page["tasks"]] == [mine_open, mine_done]
    assert [t["status"] for t in page["tasks"]] == ["claimed", "done"]
    assert [t["taskId"] for t in (await client.my_tasks(BOB))["tasks"]] == [bobs]
    assert (await client.my_tasks(seat("carol", 3)))["tasks"] == []
    # mode self may name the caller itself as the target.
    same = await client.call("my-tasks", ALICE, {}, mode="self", target=ALICE)
    assert same["tasks"] == page["tasks"]


# Mode admission: refused before anything runs.

ADMISSION_REFUSALS: list[tuple[str, Mode | None, Seat | None, ErrorCode]] = [
    ("list-tasks", "self", None, ErrorCode.PERMISSION_DENIED),
    ("list-tasks", None, ALICE, ErrorCode.PERMISSION_DENIED),
    ("get-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("create-task", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("administer-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("administer-task", "self", None, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", None, None, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("my-tasks", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("bind-task", "self", None, ErrorCode.PERMISSION_DENIED),
    ("bind-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("bind-task", None, ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "owner", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("update-task", None, None, ErrorCode.PERMISSION_DENIED),
    ("update-task", "any", ALICE, ErrorCode.PERMISSION_DENIED),
    ("claim-task", "self", BOB, ErrorCode.TARGET_MISMATCH),
    ("update-task", "self", BOB, ErrorCode.TARGET_MISMATCH),
    ("bind-task", "owner", None, ErrorCode.BAD_REQUEST),
    ("bind-task", "any", None, ErrorCode.BAD_REQUEST),
]


async def test_mode_admission_refuses_before_anything_runs(
    client: Client, presence: DictPresence
) -> None:
    task = await client.create()
    await client.claim(ALICE, task["taskId"])
    claimed = await client.get(task["taskId"])
    open_id = (await client.create())["taskId"]
    seq = await client.change_seq()
    presence.lookups.clear()
    # Args that would succeed if the command ran.
    valid: dict[str, dict[str, Any]] = {
        "list-tasks": {},
        "get-task": {"taskId": open_id},
        "my-tasks": {},
        "create-task": {"title": "x"},
        "administer-task": {"taskId": task["taskId"], "unbind": True},
        "bind-task": {"taskId": open_id},
        "claim-task": {"taskId": open_id},
        "update-task": {"taskId": task["taskId"], "status": "done"},
    }
    for command, mode, target, code in ADMISSION_REFUSALS:
        error = await client.refused(code, command, ALICE, valid[command], mode=mode, target=target)
        assert error.outcome == "not-executed"
    # Admission comes before argument validation, too.
    await client.refused(ErrorCode.PERMISSION_DENIED, "update-task", ALICE, {"bogus": 1})
    await client.refused(ErrorCode.PERMISSION_DENIED, "my-tasks", ALICE, {"limit": 0})
    assert await client.change_seq() == seq
    assert await client.get(task["taskId"]) == claimed
    assert "binding" not in await client.get(open_id)
    assert presence.lookups == []


async def test_an_unknown_command_is_unimplemented(client: Client) -> None:
    for command in ("delete-task", "list_tasks", ""):
        error = await client.refused(ErrorCode.UNIMPLEMENTED, command, OPERATOR, {})
        assert error.outcome == "not-executed"
    await client.refused(
        ErrorCode.UNIMPLEMENTED, "reassign-task", ALICE, {"taskId": "t"}, mode="self"
    )


# One page builder: list-tasks, my-tasks and the dashboard's page of records.


async def test_a_page_is_what_the_contracts_page_model_answers(client: Client) -> None:
    for n in range(3):
        await client.create(f"task {n}", brief="long text")
    page = await client.list_tasks(limit=2)
    assert "nextCursor" in page
    assert TaskPage.model_validate(page).to_json() == page  # the model's own form and order


async def test_the_board_feed_is_the_list_tasks_page_with_full_records(
    client: Client, service: CommandService
) -> None:
    created = [
        await client.create(f"task {n}", brief="long text", evidence=[{"kind": "run", "ref": "r"}])
        for n in range(3)
    ]
    listed = await client.list_tasks(limit=2, status=["open"])
    records = await service.record_page({"limit": 2, "status": ["open"]})
    assert records["tasks"] == created[:2]  # each task as get-task answers it
    assert {k: v for k, v in records.items() if k != "tasks"} == {
        k: v for k, v in listed.items() if k != "tasks"
    }
    # A cursor from one continues the other.
    rest = await client.list_tasks(cursor=records["nextCursor"], status=["open"])
    assert [t["taskId"] for t in rest["tasks"]] == [created[2]["taskId"]]


async def test_the_board_feed_refuses_what_list_tasks_refuses_in_the_same_words(
    client: Client, service: CommandService
) -> None:
    listed = await client.refused(ErrorCode.BAD_REQUEST, "list-tasks", OPERATOR, {"limit": 0})
    with pytest.raises(ContractError) as fed:
        await service.record_page({"limit": 0})
    assert (fed.value.code, fed.value.message) == (listed.code, listed.message)
    assert fed.value.outcome == "not-executed"
