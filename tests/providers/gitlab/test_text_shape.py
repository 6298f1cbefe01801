"""A GitLab issue description keeps its lines: tracker → task → agent → write-back as
Markdown line breaks (``tests/providers/text_shape.py``)."""

from __future__ import annotations

from tests.bridge._support import DictPresence
from tests.providers.gitlab._support import BUILDER, PROJECT, GitLabEndpoint
from tests.providers.text_shape import BODY, round_trip
from tests.support.fake_tracker import unmarked


async def test_an_issue_description_keeps_its_line_structure_both_ways(
    gl: GitLabEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    iid = int(gl.fake.add_issue(PROJECT, "It fails on 7", BODY)["iid"])

    def written() -> tuple[str | None, str | None]:
        issue = gl.fake.issue(PROJECT, iid)
        notes = [note for note in issue.notes if not note.system]
        return unmarked(issue.description), unmarked(notes[-1].body)

    await round_trip(gl, iid, BUILDER, written)
