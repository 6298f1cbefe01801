"""Write-back that says what GitLab applied, keeps human assignees, and answers in time.

GitLab Free keeps only the first id of ``assignee_ids``: a claim must never cost a human
their assignment, and rides on the claimed label where the one assignee is someone
else's. A stalled GitLab answers a write after its deadline: the caller hears ``unknown``
in time, a write to another task is not held up behind it, and a retry with the same
envelope id learns the result without a second write.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.store import deadline_at
from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import (
    BUILDER,
    CLAIMED,
    HUMAN,
    ISSUES,
    PROJECT,
    SEAT_USER,
    GitLabEndpoint,
    labels_of,
    open_gitlab,
    task_id,
    writes_to,
)
from tests.providers.gitlab.test_writeback import imported
from tests.support.fake_gitlab import FakeGitLab
from tests.support.polling import eventually

Json = dict[str, Any]


@pytest.fixture(autouse=True)
def builder_present(presence: DictPresence) -> None:
    presence.put(BUILDER, environment=None)


def within(seconds: float) -> Any:
    """The deadline a request with ``deadlineMs = seconds * 1000`` carries from now."""
    return deadline_at(asyncio.get_running_loop().time() + seconds)


@pytest.mark.parametrize("configured", [None, True], ids=["detected", "configured"])
async def test_a_single_assignee_tier_keeps_the_human_and_claims_by_label(
    gitlab: FakeGitLab,
    gitlab_url: str,
    tmp_path: Path,
    presence: DictPresence,
    configured: bool | None,
) -> None:
    gitlab.single_assignee = True  # GitLab Free
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, single_assignee=configured
    ) as gl:
        (iid,) = await imported(gl, 1, assignees=[HUMAN])
        mark = len(gitlab.requests)

        claimed = await gl.client.claim(BUILDER, task_id(iid))

        assert gitlab.issue(PROJECT, iid).assignees == [HUMAN]  # never unassigned
        assert labels_of(gitlab, iid) == [CLAIMED]
        (put,) = writes_to(gitlab, iid, mark)
        assert isinstance(put.body, dict)
        sent = put.body.get("assignee_ids")
        if configured:
            assert sent is None  # the label alone: one assignee, and it is the human's
        else:
            assert sent is not None
            assert sent[0] == gitlab.users[HUMAN].id
        assert (claimed["status"], claimed["statusSource"]) == ("claimed", CLAIMED)
        assert claimed["binding"]["actor"] == BUILDER.actor
        assert await gl.get(iid) == claimed

        gl.fake.advance(30)
        await gl.poll()  # the tracker's view: the human assigned, the label on
        assert await gl.get(iid) == claimed

        released = await gl.client.administer(task_id(iid), status="open", unbind=True)
        assert released["status"] == "open"
        assert "binding" not in released
        assert gitlab.issue(PROJECT, iid).assignees == [HUMAN]
        assert labels_of(gitlab, iid) == []


async def test_a_single_assignee_tier_assigns_the_seat_to_an_unassigned_issue(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    gitlab.single_assignee = True
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "b", presence=presence, single_assignee=True
    ) as gl:
        (iid,) = await imported(gl, 1)
        claimed = await gl.client.claim(BUILDER, task_id(iid))
        assert gitlab.issue(PROJECT, iid).assignees == [SEAT_USER]
        assert claimed["status"] == "claimed"


async def test_a_write_refused_after_the_labels_took_effect_says_executed(
    gl: GitLabEndpoint,
) -> None:
    """GitLab took the PUT (the label is on) but did not assign the seat: the answer
    says ``executed`` and the mirror shows what GitLab holds."""
    (iid,) = await imported(gl, 1)
    gl.fake.users.pop(SEAT_USER)  # the seat's account can no longer be assigned
    gl.hosted.tracker.client._users[SEAT_USER] = 999_999  # type: ignore[attr-defined]

    with pytest.raises(ContractError) as refused:
        await gl.client.claim(BUILDER, task_id(iid))

    assert refused.value.outcome == "executed"
    assert labels_of(gl.fake, iid) == [CLAIMED]
    shown = await gl.get(iid)
    assert (shown["status"], shown["statusSource"]) == ("open", CLAIMED)


async def test_a_stalled_write_answers_by_its_deadline_and_holds_up_no_other_task(
    gl: GitLabEndpoint,
) -> None:
    first, second = await imported(gl, 2)
    gl.fake.stall_next(6.0, method="PUT", path=f"{ISSUES}/{first}")
    args = {"taskId": task_id(first)}

    def gitlab_answered_the_stalled_write() -> bool:
        return any(r.method == "PUT" and r.path == f"{ISSUES}/{first}" for r in gl.fake.requests)

    async def stalled_claim() -> tuple[ContractError, bool]:
        with within(1.0), pytest.raises(ContractError) as late:
            await gl.client.call("claim-task", BUILDER, args, mode="self", envelope_id="e-1")
        return late.value, gitlab_answered_the_stalled_write()

    late_task = asyncio.create_task(stalled_claim())
    await eventually(lambda: not gl.fake.stalls, what="the first claim held at GitLab")
    with within(3.0):
        other = await gl.client.claim(BUILDER, task_id(second))
    other_before_the_stall_ended = not gitlab_answered_the_stalled_write()
    late, answered_after_gitlab = await late_task

    assert other["status"] == "claimed"
    assert other_before_the_stall_ended  # not held up behind the stalled write
    assert late.code is ErrorCode.DEADLINE_EXCEEDED
    assert late.outcome == "unknown"
    assert not answered_after_gitlab  # by its own deadline, not GitLab's answer

    await gl.store.writes.drain()  # GitLab answers; the write finishes in the background
    assert labels_of(gl.fake, first) == [CLAIMED]
    shown = await gl.get(first)
    assert shown["status"] == "claimed"
    mark = len(gl.fake.requests)
    again = await gl.client.call("claim-task", BUILDER, args, mode="self", envelope_id="e-1")
    assert again == shown
    assert writes_to(gl.fake, first, mark) == []
    assert len([r for r in gl.fake.writes if r.path == f"{ISSUES}/{first}"]) == 1


async def test_a_write_waiting_behind_another_past_its_deadline_is_not_executed(
    gl: GitLabEndpoint,
) -> None:
    (iid,) = await imported(gl, 1)
    gl.fake.stall_next(6.0, method="PUT", path=f"{ISSUES}/{iid}")
    first = asyncio.create_task(gl.client.claim(BUILDER, task_id(iid)))
    await eventually(lambda: not gl.fake.stalls, what="the claim held at GitLab")

    with within(0.5), pytest.raises(ContractError) as waited:
        await gl.client.administer(task_id(iid), status="dropped", note="Not needed.")

    assert waited.value.code is ErrorCode.DEADLINE_EXCEEDED
    assert waited.value.outcome == "not-executed"
    assert (await first)["status"] == "claimed"
    assert [n for n in gl.fake.issue(PROJECT, iid).notes if not n.system] == []
    assert gl.fake.issue(PROJECT, iid).state == "opened"
