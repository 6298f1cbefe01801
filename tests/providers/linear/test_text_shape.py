"""A Linear issue's description keeps its lines: tracker → task → agent → write-back as
Markdown line breaks (``tests/providers/text_shape.py``)."""

from __future__ import annotations

from tests.providers.linear._support import BUILDER, LinearEndpoint
from tests.providers.text_shape import BODY, round_trip
from tests.support.fake_tracker import unmarked


async def test_a_description_keeps_its_line_structure_both_ways(ln: LinearEndpoint) -> None:
    issue = ln.fake.new_issue("It fails on 7", BODY)

    def written() -> tuple[str | None, str | None]:
        return unmarked(issue.description), unmarked(issue.comments[-1].body)

    await round_trip(ln, 1, BUILDER, written)
