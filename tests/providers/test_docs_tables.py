"""The statusSource tables of docs/github.md and docs/gitlab.md say what the default rules
do: each native state below is evaluated by the code, and its row in the doc's table must
name the same status and list the same statusSource."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.providers.github.config import github_default_rules
from cotal_tasks.providers.gitlab.config import gitlab_default_rules
from cotal_tasks.providers.hosted.mapping import evaluate
from cotal_tasks.providers.hosted.tracker import NativeState

DOCS = Path(__file__).parents[2] / "docs"

GITHUB = [
    NativeState("closed", "not_planned"),
    NativeState("closed", "duplicate"),
    NativeState("closed", "completed"),
    NativeState("closed"),
    NativeState("open", labels=("blocked",)),
    NativeState("open", labels=("in-progress",)),
    NativeState("open"),
]
GITLAB = [
    NativeState("closed", "duplicate"),
    NativeState("closed", labels=("workflow::won't do",)),
    NativeState("closed"),
    NativeState("opened", labels=("workflow::blocked",)),
    NativeState("opened", labels=("workflow::in progress",)),
    NativeState("opened"),
]


def rows(doc: str) -> list[list[str]]:
    """The rows of the doc's status table (the one whose header has a statusSource column)."""
    lines = (DOCS / doc).read_text(encoding="utf-8").splitlines()
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("| status |") and "statusSource" in line
    )
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    return table


@pytest.mark.parametrize(
    ("doc", "rules", "cases"),
    [("github.md", github_default_rules(), GITHUB), ("gitlab.md", gitlab_default_rules(), GITLAB)],
)
def test_the_docs_table_matches_the_default_rules(
    doc: str, rules: object, cases: list[NativeState]
) -> None:
    table = rows(doc)
    for native in cases:
        status, source = evaluate(rules, native)  # type: ignore[arg-type]
        row = next(
            (r for r in table if r[0] == status and (f"`{source}`" in r[2] or "the label" in r[2])),
            None,
        )
        assert row is not None, f"{doc}: no row says {status} with statusSource {source!r}"
        if "the label" in row[2]:
            assert source in native.labels
