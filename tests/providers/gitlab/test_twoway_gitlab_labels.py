"""Two-way labels and state on GitLab: the bridge writes labels with GitLab's add-only
and remove-only forms (``add_labels``/``remove_labels``), never the whole list, so a
label a person adds before, during or after a seat's write is kept; the mirror follows a
person's later edit within one poll, and idle polls write nothing."""

from __future__ import annotations

import pytest

from tests.providers.gitlab._support import (
    BLOCKED,
    BUILDER,
    CLAIMED,
    ISSUES,
    PROJECT,
    GitLabEndpoint,
    labels_of,
    task_id,
)
from tests.support.fake_gitlab import FakeGitLab


async def one_issue(gl: GitLabEndpoint) -> int:
    gl.fake.advance(60)
    iid = int(gl.fake.add_issue(PROJECT, "Shared work")["iid"])
    await gl.poll()
    return iid


def person_labels(fake: FakeGitLab, iid: int, *names: str) -> None:
    fake.advance(1)
    issue = fake.issue(PROJECT, iid)
    fake.set_labels(issue, [*issue.labels, *names])


def before_the_put(fake: FakeGitLab, iid: int, *names: str) -> None:
    done: list[bool] = []

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        if method == "PUT" and path == f"{ISSUES}/{iid}" and not done:
            done.append(True)
            person_labels(fake, iid, *names)

    fake.before_answer = hook


async def idle_polls_write_nothing(gl: GitLabEndpoint) -> None:
    writes = len(gl.fake.writes)
    for _ in range(3):
        gl.fake.advance(5)
        await gl.poll()
    assert len(gl.fake.writes) == writes


@pytest.mark.parametrize("when", ["before", "during", "after"])
async def test_a_persons_label_is_kept_around_a_claim(gl: GitLabEndpoint, when: str) -> None:
    iid = await one_issue(gl)
    if when == "before":
        person_labels(gl.fake, iid, "needs-docs")  # not yet mirrored
    elif when == "during":
        before_the_put(gl.fake, iid, "needs-docs")
    claimed = await gl.client.claim(BUILDER, task_id(iid))
    gl.fake.before_answer = None
    if when == "after":
        person_labels(gl.fake, iid, "needs-docs")
    assert claimed["status"] == "claimed"
    assert set(labels_of(gl.fake, iid)) == {"needs-docs", CLAIMED}
    await gl.poll()
    record = await gl.get(iid)
    assert (record["status"], record["statusSource"]) == ("claimed", CLAIMED)
    await idle_polls_write_nothing(gl)


async def test_a_persons_status_label_after_the_seats_write_is_mirrored(
    gl: GitLabEndpoint,
) -> None:
    """The person's later ``workflow::blocked`` is theirs: the bridge does not take it off
    again, and the mirror reads it within one poll (the seat stays bound)."""
    iid = await one_issue(gl)
    await gl.client.claim(BUILDER, task_id(iid))
    person_labels(gl.fake, iid, BLOCKED)
    await gl.poll()
    record = await gl.get(iid)
    assert (record["status"], record["statusSource"]) == ("blocked", BLOCKED)
    assert BLOCKED in labels_of(gl.fake, iid)
    await idle_polls_write_nothing(gl)
