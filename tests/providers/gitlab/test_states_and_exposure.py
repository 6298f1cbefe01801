"""GitLab issues in the shapes real projects have: a project deep in subgroups (its task
ids stay within the bound), issues moved to another project and issues closed as
duplicates (visible states, as on GitHub), and confidential issues (withheld from the
board unless the operator opts in)."""

from __future__ import annotations

from pathlib import Path

from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import PROJECT, GitLabEndpoint, open_gitlab, task_id
from tests.providers.hosted_support import add_issues
from tests.support.fake_gitlab import FakeGitLab

DEEP = "/".join(["platform-engineering-and-operations"] * 5) + "/billing-service"


async def test_a_project_deep_in_subgroups_is_mirrored(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    gitlab.add_project(DEEP)
    add_issues(gitlab, DEEP, 3)
    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "bridge", presence=presence, project=DEEP
    ) as deep:
        report = await deep.poll()  # before: the taskId was over its bound; the sync stopped

        tasks = await deep.all_tasks()
        assert report.issues == 3
        assert len(tasks) == 3
        ids = [task["taskId"] for task in tasks]
        assert all(len(tid.encode()) <= 128 for tid in ids)
        assert sorted(deep.tracker.number_of(tid) or 0 for tid in ids) == [1, 2, 3]
        assert deep.store.degradations()["counts"] == {}


async def test_moved_and_duplicate_issues_become_dropped(gl: GitLabEndpoint) -> None:
    fake = gl.fake
    fake.add_project(PROJECT)
    add_issues(fake, PROJECT, 3)
    await gl.poll()
    fake.advance(60)
    moved = fake.issue(PROJECT, 1)
    fake.close_issue(PROJECT, 1)
    moved.moved_to_id = 9001
    duplicate = fake.issue(PROJECT, 2)
    fake.close_issue(PROJECT, 2)
    duplicate.duplicate_of = f"{fake.api_url}/projects/1/issues/3"

    await gl.poll()

    one, two = await gl.get(1), await gl.get(2)
    assert (one["status"], one["statusSource"]) == ("dropped", "moved")  # before: done
    assert (two["status"], two["statusSource"]) == ("dropped", "closed/duplicate")  # before: done
    assert (await gl.get(3))["status"] == "open"


async def test_confidential_issues_are_withheld_unless_the_operator_opts_in(
    gitlab: FakeGitLab, gitlab_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    gitlab.add_project(PROJECT)
    gitlab.add_issue(PROJECT, "Public")
    gitlab.add_issue(PROJECT, "Security hole in login", "Details", confidential=True)
    gitlab.add_issue(PROJECT, "Public, for now", "Plain text")

    async with open_gitlab(gitlab, gitlab_url, tmp_path / "plain", presence=presence) as gl:
        await gl.poll()
        assert [t["taskId"] for t in await gl.all_tasks()] == [task_id(1), task_id(3)]

        # An issue made confidential after it was mirrored keeps nothing it said.
        gitlab.advance(60)
        gitlab.issue(PROJECT, 3).confidential = True
        gitlab.touch(PROJECT, 3)
        await gl.poll()
        hidden = await gl.get(3)
        assert hidden["title"] == "(confidential issue)"
        assert "brief" not in hidden
        assert (hidden["status"], hidden["statusSource"]) == ("dropped", "confidential")

    async with open_gitlab(
        gitlab, gitlab_url, tmp_path / "opted-in", presence=presence, include_confidential=True
    ) as opted:
        await opted.poll()
        assert len(await opted.all_tasks()) == 3
        assert (await opted.get(2))["title"] == "Security hole in login"
