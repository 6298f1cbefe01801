"""The mapping of Jira's JSON: Atlassian's recorded examples, the default status rules
over status category, name, resolution and labels, Atlassian Document Format to text,
bounded and credential-shaped text, and remote links as evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.core import BRIEF_BYTES
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.mapping import evaluate, project
from cotal_tasks.providers.jira import adf, mapping
from cotal_tasks.providers.jira.config import jira_default_rules
from cotal_tasks.providers.jira.mapping import IN_PROGRESS, link_evidence, tracked
from tests.providers.jira._support import BUILDER, SEAT_ACCOUNT, SEATS
from tests.support.fake_jira import FakeJira
from tests.support.fake_jira_state import PROJECT

FIXTURES = Path(__file__).parents[2] / "fixtures" / "jira"


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def keys(value: Any) -> set[str]:
    return set(value) if isinstance(value, dict) else set()


def issue_of(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "summary": "Fix the login",
        "status": {"name": "To Do", "statusCategory": {"key": "new"}},
        "labels": [],
        "created": "2026-03-10T10:00:00.000+0000",
        "updated": "2026-03-10T11:00:00.000+0000",
    }
    return {"id": "10007", "key": f"{PROJECT}-7", "fields": {**base, **fields}}


def status(name: str, category: str) -> dict[str, Any]:
    return {"name": name, "statusCategory": {"key": category}}


def mapped(issue: dict[str, Any], boundary: ItemBoundary | None = None) -> Any:
    seen = boundary or ItemBoundary("Jira")
    return project(
        tracked(PROJECT, issue),
        space="demo",
        rules=jira_default_rules(),
        seats=SEATS,
        existing=None,
        uid_of=lambda owner, actor: BUILDER.lifecycleUid if actor == "builder" else None,
        now=1,
        note=lambda reason, detail: seen.note(reason, "DEMO#7", detail),
    )


def test_the_recorded_search_example_maps_without_its_missing_fields() -> None:
    (item,) = recorded("search_jql_post_200.json")["issues"]
    issue = tracked("ED", item)
    assert (issue.number, issue.task_id, issue.title) == (1, "ED#1", "")
    assert issue.body == "Main order flow broken"  # API v2's plain-string description
    assert issue.native.extra == {"category": "new", "status": "new"}
    task = project(
        issue,
        space="demo",
        rules=jira_default_rules(),
        seats={},
        existing=None,
        uid_of=lambda o, a: None,
        now=1,
    )
    assert (task.title, task.status) == ("(untitled ED#1)", "open")


def test_the_fake_renders_issues_with_the_recorded_keys() -> None:
    (example,) = recorded("search_jql_post_200.json")["issues"]
    fake = FakeJira()
    rendered = fake.issue_json(fake.add_issue(PROJECT, "x"), list(mapping.FIELDS))
    assert keys(rendered) - {"properties"} == keys(example)
    project_keys = keys(example["fields"]["project"]) - {"avatarUrls", "insight", "projectCategory"}
    assert project_keys >= keys(rendered["fields"]["project"])


def test_the_fake_renders_transitions_with_the_recorded_keys() -> None:
    example = recorded("transitions_get_200.json")["transitions"][0]
    fake = FakeJira()
    rendered = fake.transition_json(fake.workflow[2], expand=True)
    assert keys(rendered) == keys(example)
    assert keys(rendered["to"]) == keys(example["to"])
    assert keys(rendered["to"]["statusCategory"]) == keys(example["to"]["statusCategory"])
    meta = rendered["fields"]["resolution"]
    assert keys(meta) - {"allowedValues"} <= keys(example["fields"]["summary"])


def test_the_recorded_remote_link_to_a_support_site_is_no_evidence() -> None:
    assert link_evidence(recorded("remotelink_get_200.json"), 5) == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ("open", "To Do")),
        ({"status": status("In Progress", "indeterminate")}, ("open", "In Progress")),
        (
            {
                "status": status("In Progress", "indeterminate"),
                "assignee": {"accountId": SEAT_ACCOUNT},
            },
            ("claimed", "In Progress"),
        ),
        (
            {"status": status("Blocked", "indeterminate"), "assignee": {"accountId": SEAT_ACCOUNT}},
            ("blocked", "Blocked"),
        ),
        (
            {"labels": ["Blocked"], "assignee": {"accountId": SEAT_ACCOUNT}},
            ("blocked", "Blocked"),
        ),
        ({"status": status("Done", "done"), "resolution": {"name": "Done"}}, ("done", "Done")),
        ({"status": status("Closed", "done")}, ("done", "Closed")),
        (
            {"status": status("Done", "done"), "resolution": {"name": "Won't Do"}},
            ("dropped", "Done/Won't Do"),
        ),
        (
            {"status": status("Closed", "done"), "resolution": {"name": "Duplicate"}},
            ("dropped", "Closed/Duplicate"),
        ),
        (
            {"status": status("Done", "done"), "resolution": {"name": "Cannot Reproduce"}},
            ("dropped", "Done/Cannot Reproduce"),
        ),
        ({"status": status("Triage", "undefined")}, ("open", "Triage")),
    ],
)
def test_the_default_rules(fields: dict[str, Any], expected: tuple[str, str]) -> None:
    task = mapped(issue_of(**fields))
    assert (task.status, task.statusSource) == expected


def test_a_person_assigned_never_binds() -> None:
    task = mapped(
        issue_of(
            status=status("In Progress", "indeterminate"),
            assignee={"accountId": "557058:human"},
        )
    )
    assert (task.status, task.binding) == ("open", None)


def test_a_seat_assigned_binds_it() -> None:
    task = mapped(issue_of(assignee={"accountId": SEAT_ACCOUNT}))
    assert task.binding is not None
    assert (task.binding.owner, task.binding.actor) == ("local", "builder")
    assert task.status == "claimed"


def test_the_claim_mark_rides_only_on_the_in_progress_category() -> None:
    assert (
        IN_PROGRESS in tracked(PROJECT, issue_of(status=status("X", "indeterminate"))).native.labels
    )
    assert IN_PROGRESS not in tracked(PROJECT, issue_of()).native.labels
    assert evaluate(jira_default_rules(), tracked(PROJECT, issue_of()).native) == ("open", "To Do")


def test_the_description_is_rendered_from_adf() -> None:
    document = {
        "type": "doc",
        "version": 1,
        "content": [
            {
                "type": "heading",
                "attrs": {"level": 2},
                "content": [{"type": "text", "text": "Steps"}],
            },
            {
                "type": "orderedList",
                "content": [
                    {
                        "type": "listItem",
                        "content": [
                            {"type": "paragraph", "content": [{"type": "text", "text": "open it"}]}
                        ],
                    },
                    {
                        "type": "listItem",
                        "content": [
                            {
                                "type": "paragraph",
                                "content": [
                                    {"type": "text", "text": "ask "},
                                    {"type": "mention", "attrs": {"id": "1", "text": "@Mia"}},
                                ],
                            }
                        ],
                    },
                ],
            },
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "hardBreak"},
                    {"type": "inlineCard", "attrs": {"url": "https://example.com/x"}},
                ],
            },
            {"type": "codeBlock", "content": [{"type": "text", "text": "make test"}]},
        ],
    }
    assert tracked(PROJECT, issue_of(description=document)).body == (
        "Steps\n\n1. open it\n2. ask @Mia\n\nsee\nhttps://example.com/x\n\nmake test"
    )


def test_a_deep_or_huge_document_is_read_within_bounds() -> None:
    node: dict[str, Any] = {"type": "text", "text": "bottom"}
    for _ in range(500):
        node = {"type": "paragraph", "content": [node]}
    assert adf.to_text({"type": "doc", "content": [node]}) is None  # past MAX_DEPTH: unread
    wide = {"type": "doc", "content": [{"type": "text", "text": "x" * 1000}] * 1000}
    text = adf.to_text(wide)
    assert text is not None
    assert len(text) <= 16_384


def test_an_oversize_brief_is_cut_and_counted() -> None:
    boundary = ItemBoundary("Jira")
    task = mapped(issue_of(description=adf.from_text("y" * 10_000)), boundary)
    assert task.brief is not None
    assert len(task.brief.encode()) <= BRIEF_BYTES
    assert boundary.counts == {"text-cut": 1}


def test_a_credential_shaped_summary_is_left_out_and_counted() -> None:
    boundary = ItemBoundary("Jira")
    task = mapped(issue_of(summary="password=hunter2"), boundary)
    assert task.title == "(untitled DEMO#7)"
    assert boundary.counts == {"text-refused": 1}


def test_text_becomes_an_adf_document_and_back() -> None:
    text = "Claimed by local.builder\nsee the log\n\nEvidence:\n- commit: acme/app@abc1234"
    document = adf.from_text(text)
    assert document["type"] == "doc"
    assert document["version"] == 1
    assert adf.to_text(document) == text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/acme/app/pull/12", ("review", "https://github.com/acme/app/pull/12")),
        ("https://github.com/acme/app/commit/abc1234def", ("commit", "acme/app@abc1234def")),
        (
            "https://github.com/acme/app/actions/runs/99",
            ("run", "https://github.com/acme/app/actions/runs/99"),
        ),
        (
            "https://gitlab.com/acme/sub/app/-/merge_requests/3",
            ("review", "https://gitlab.com/acme/sub/app/-/merge_requests/3"),
        ),
        ("https://gitlab.com/acme/sub/app/-/commit/0a1b2c3d", ("commit", "acme/sub/app@0a1b2c3d")),
        (
            "https://gitlab.example.org/acme/app/-/pipelines/7",
            ("run", "https://gitlab.example.org/acme/app/-/pipelines/7"),
        ),
    ],
)
def test_remote_links_become_evidence_attributed_to_their_repository(
    url: str, expected: tuple[str, str]
) -> None:
    (found,) = link_evidence({"object": {"url": url, "title": "x"}}, 5)
    assert (found.kind, found.ref) == expected


def test_an_issue_of_another_project_is_not_mapped() -> None:
    with pytest.raises(ValueError, match="another project"):
        tracked("OTHER", issue_of())


def test_a_linked_text_keeps_its_url() -> None:
    link = {"type": "link", "attrs": {"href": "https://ci.example/run/7"}}
    document = {
        "type": "doc",
        "content": [
            {
                "type": "paragraph",
                "content": [
                    {"type": "text", "text": "see "},
                    {"type": "text", "text": "the run", "marks": [{"type": "strong"}, link]},
                    {
                        "type": "text",
                        "text": "https://x.example",
                        "marks": [{"type": "link", "attrs": {"href": "https://x.example"}}],
                    },
                ],
            }
        ],
    }
    assert adf.to_text(document) == "see the run (https://ci.example/run/7)https://x.example"
