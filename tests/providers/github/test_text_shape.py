"""A GitHub issue body keeps its lines: tracker → task → agent → write-back as Markdown
line breaks (``tests/providers/text_shape.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.core.text import controls_as_spaces
from cotal_tasks.providers.hosted import mapping
from cotal_tasks.providers.hosted.sync import MAPPING
from tests.bridge._support import DictPresence
from tests.providers.github._support import BUILDER, REPO, GitHubEndpoint, open_github
from tests.providers.text_shape import BODY, BRIEF, round_trip
from tests.support.fake_github import FakeGitHub
from tests.support.fake_tracker import unmarked


async def test_an_issue_body_keeps_its_line_structure_both_ways(
    gh: GitHubEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    gh.fake.add_issue(REPO, "It fails on 7", BODY.replace("\n", "\r\n"))  # the web form's

    def written() -> tuple[str | None, str | None]:
        issue = gh.fake.issue(REPO, 1)
        return unmarked(issue.body), unmarked(issue.comments[-1].body)

    await round_trip(gh, 1, BUILDER, written)


async def test_a_mirror_read_with_the_old_mapping_is_read_again_in_full(
    fake: FakeGitHub, github_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An issue nobody touched since the upgrade keeps its line structure too: a mirror
    read with an older mapping revision (none recorded) is read again once, in full."""
    fake.add_issue(REPO, "It fails on 7", BODY)
    with monkeypatch.context() as old:
        old.setattr(mapping, "lines_kept", controls_as_spaces)  # the mapping before
        async with open_github(fake, github_url, tmp_path / "bridge") as before:
            await before.poll()
            assert (await before.get(1))["brief"] == "Steps to reproduce:  1. open 7 2. see it fail"
            sync = before.sync
            await sync.checkpoints.save(sync.key + MAPPING, {}, 0)  # as an older bridge left it
    async with open_github(fake, github_url, tmp_path / "bridge") as after:
        report = await after.poll()  # nothing changed on GitHub since
        assert report.changed == 1
        assert (await after.get(1))["brief"] == BRIEF
        assert (await after.poll()).changed == 0  # once: the revision is recorded
