"""A Jira description keeps its lines: ADF paragraphs and hard breaks → task → agent →
write-back as ADF paragraphs and hard breaks again (``tests/providers/text_shape.py``)."""

from __future__ import annotations

from typing import Any

from tests.bridge._support import DictPresence
from tests.providers.jira._support import BUILDER, JiraEndpoint
from tests.providers.text_shape import round_trip
from tests.support.fake_jira_state import PROJECT

Json = dict[str, Any]


def text(value: str) -> Json:
    return {"type": "text", "text": value}


def paragraph(*inline: Json) -> Json:
    return {"type": "paragraph", "content": list(inline)}


def doc(*blocks: Json) -> Json:
    return {"type": "doc", "version": 1, "content": list(blocks)}


BREAK = {"type": "hardBreak"}


async def test_an_adf_description_keeps_its_paragraphs_and_breaks_both_ways(
    jr: JiraEndpoint, presence: DictPresence
) -> None:
    presence.put(BUILDER, environment=None)
    issue = jr.fake.add_issue(PROJECT, "It fails on 7")
    # BODY as Jira's editor keeps it: a paragraph, then one whose lines are hard breaks
    issue.description = doc(
        paragraph(text("Steps to reproduce:")),
        paragraph(text("1. open 7"), BREAK, text("2. see it fail")),
    )

    def written() -> tuple[Any, Any]:
        return issue.description, issue.comments[-1].body

    await round_trip(
        jr,
        issue.number,
        BUILDER,
        written,
        expected=(
            doc(
                paragraph(text("Fixed by:")),
                paragraph(text("- a parser change"), BREAK, text("- a test")),
            ),
            doc(paragraph(text("Done."), BREAK, text("Checked by hand."))),
        ),
    )
