"""A GitHub issue body keeps its lines: tracker → task → agent → write-back as Markdown
line breaks (``tests/providers/text_shape.py``)."""

from __future__ import annotations

from tests.bridge._support import DictPresence
from tests.providers.github._support import BUILDER, REPO, GitHubEndpoint
from tests.providers.text_shape import BODY, round_trip
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
