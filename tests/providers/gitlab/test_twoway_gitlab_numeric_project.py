"""A numeric ``project``: its tasks are named by the project's path, which the endpoint
knows from its start (asked of GitLab, and kept in the mirror's state), so a claim after a
restart is served before any issue has been read again."""

from __future__ import annotations

from pathlib import Path

from tests.providers.gitlab._support import BUILDER, PROJECT, SEAT_USER, open_gitlab, task_id
from tests.support.fake_gitlab import FakeGitLab


async def first_start(fake: FakeGitLab, url: str, data: Path, numeric: str) -> None:
    async with open_gitlab(fake, url, data, project=numeric) as gl:
        await gl.poll()
        assert [t["taskId"] for t in await gl.all_tasks()] == [task_id(1)]


async def test_a_claim_after_a_restart_is_served_before_any_issue_is_read(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    fake = gitlab
    fake.add_issue(PROJECT, "Numbered")
    numeric = str(fake.project(PROJECT).id)
    await first_start(fake, gitlab_url, tmp_path / "b", numeric)
    async with open_gitlab(fake, gitlab_url, tmp_path / "b", project=numeric) as gl:
        claimed = await gl.client.claim(BUILDER, task_id(1))  # no poll since the restart
        assert claimed["status"] == "claimed"
        assert fake.issue(PROJECT, 1).assignees == [SEAT_USER]


async def test_the_path_is_kept_for_a_restart_while_gitlab_cannot_say_it(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path
) -> None:
    fake = gitlab
    fake.add_issue(PROJECT, "Numbered")
    numeric = str(fake.project(PROJECT).id)
    await first_start(fake, gitlab_url, tmp_path / "b", numeric)
    fake.fail_next(status=403, method="GET", path=f"/api/v4/projects/{numeric}")
    async with open_gitlab(fake, gitlab_url, tmp_path / "b", project=numeric) as gl:
        claimed = await gl.client.claim(BUILDER, task_id(1))
        assert claimed["status"] == "claimed"
    assert not fake.failures  # asked, refused: the path kept in the mirror's state served
