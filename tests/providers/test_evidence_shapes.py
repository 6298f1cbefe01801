"""Evidence readers take whatever JSON a tracker sends: a node of another shape costs its
own link, never the read (property tests over arbitrary JSON)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cotal_tasks.providers.github import evidence
from cotal_tasks.providers.gitlab.mapping import merge_request_evidence
from cotal_tasks.providers.hosted.boundary import ItemBoundary

KEYS = st.sampled_from(
    [
        "repository", "a0", "a1", "timelineItems", "nodes", "pageInfo", "__typename",
        "source", "subject", "closer", "commit", "oid", "url", "headRefName",
        "headRepository", "nameWithOwner", "createdAt", "number", "body", "comments",
        "closingIssuesReferences", "startCursor", "hasPreviousPage", "mergeCommit",
        "web_url", "source_branch", "head_pipeline", "references", "full",
        "merge_commit_sha", "updated_at", "merged_at",
    ]
)  # fmt: skip
TYPES = st.sampled_from(
    ["CrossReferencedEvent", "ConnectedEvent", "ReferencedEvent", "ClosedEvent", "PullRequest"]
)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | TYPES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_a_github_answer_of_any_shape_is_read_without_an_exception(data: Any) -> None:
    found = evidence.Found()
    evidence.read("o/r", [evidence.Ask(1), evidence.Ask(2, pull=True)], data, found)
    evidence.timeline_evidence("o/r", data if isinstance(data, list) else [data])
    assert all(isinstance(e.ref, str) and e.ref for items in found.evidence.values() for e in items)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=8), st.booleans())
def test_a_gitlab_merge_request_of_any_shape_is_read_without_an_exception(
    merge_request: dict[str, Any], closed_it: bool
) -> None:
    for item in merge_request_evidence(merge_request, closed_it=closed_it, own_path="g/p"):
        assert isinstance(item.ref, str)
        assert item.ref


def test_an_answer_node_of_another_shape_is_counted_and_the_rest_read() -> None:
    boundary = ItemBoundary("test")
    found = evidence.Found()
    commit = {"__typename": "ReferencedEvent", "commit": {"oid": "abc123"}}
    data = {
        "repository": {
            "a0": "not an issue",
            "a1": {"number": 2, "timelineItems": {"nodes": [5, commit]}},
            "a2": None,  # gone or transferred: nothing to read, nothing refused
        }
    }
    asks = [evidence.Ask(1), evidence.Ask(2), evidence.Ask(3)]

    evidence.read("o/r", asks, data, found, boundary.note)

    assert boundary.counts == {"evidence-refused": 2}
    assert [(e.kind, e.ref) for e in found.evidence[2]] == [("commit", "abc123")]
    assert 1 not in found.evidence
