"""One bad field or item never costs the task or the sync: a branch named like a credential
drops that evidence entry only, a lone surrogate in a title is repaired, and every legal
repository path has a task id within the record's bound that parses back."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotal_tasks.core import Task, check_task_text
from cotal_tasks.providers.github import mapping as github
from cotal_tasks.providers.github.config import github_default_rules
from cotal_tasks.providers.gitlab import mapping as gitlab
from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.mapping import project, safe_cut
from cotal_tasks.providers.hosted.tracker import Evidence, TrackedIssue

REPO = "octo-org/hello-world"
CREDENTIAL_BRANCH = "fix/token=refresh"  # a legal git ref, refused by TaskText


def mapped(issue: TrackedIssue, boundary: ItemBoundary | None = None) -> Task:
    notes = boundary or ItemBoundary("GitHub")
    return project(
        issue,
        space="demo",
        rules=github_default_rules(),
        seats={},
        existing=None,
        uid_of=lambda owner, actor: None,
        now=1_700_000_000_000,
        note=lambda reason, detail: notes.note(reason, issue.task_id, detail),
    )


def issue_with(evidence: tuple[Evidence, ...], title: str = "Refresh tokens") -> TrackedIssue:
    item = {
        "number": 7,
        "title": title,
        "state": "open",
        "created_at": "2026-11-30T06:43:14Z",
        "updated_at": "2026-11-30T06:43:14Z",
    }
    return github.tracked(REPO, item, evidence)


def test_a_branch_named_like_a_credential_drops_that_entry_not_the_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    review = Evidence("review", f"https://github.com/{REPO}/pull/9", 1_000)
    branch = Evidence("branch", CREDENTIAL_BRANCH, 2_000)
    commit = Evidence("commit", "a" * 40, 3_000)
    boundary = ItemBoundary("GitHub")

    task = mapped(issue_with((review, branch, commit)), boundary)

    assert task.taskId == f"{REPO}#7"
    assert task.title == "Refresh tokens"
    assert [(e.kind, e.ref) for e in task.evidence] == [
        ("review", review.ref),
        ("commit", commit.ref),
    ]
    assert boundary.counts == {"evidence-refused": 1}
    assert boundary.snapshot()["recent"] == [
        {"reason": "evidence-refused", "item": f"{REPO}#7", "detail": "branch at 2000"}
    ]
    assert CREDENTIAL_BRANCH not in caplog.text  # logged, never quoted
    assert "evidence-refused" in caplog.text


def test_a_refused_title_is_left_out_and_counted() -> None:
    boundary = ItemBoundary("GitHub")
    task = mapped(issue_with((), title="password=hunter2"), boundary)
    assert task.title == f"(untitled {REPO}#7)"
    assert boundary.counts == {"text-refused": 1}


def test_a_lone_surrogate_in_a_title_is_repaired_not_raised() -> None:
    title = json.loads('"Deploy \\ud83d broke"')  # a lone high surrogate, as JSON allows
    assert safe_cut(title, 200) == "Deploy \ufffd broke"
    assert safe_cut(title * 40, 200).encode("utf-8")  # cut, and valid UTF-8
    assert mapped(issue_with((), title=title)).title == "Deploy \ufffd broke"


# -- task ids ----------------------------------------------------------------------------

SEGMENT = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789_.-"),
    min_size=1,
    max_size=255,
)
PATHS = st.lists(SEGMENT, min_size=2, max_size=20).map("/".join)


@settings(max_examples=200, deadline=None)
@given(path=PATHS, iid=st.integers(min_value=1, max_value=2**63 - 1))
def test_every_legal_project_path_has_a_task_id_that_parses_back(path: str, iid: int) -> None:
    task = gitlab.task_id(path, iid)
    assert len(task.encode("utf-8")) <= 128
    check_task_text(task, 128, field="taskId")
    assert gitlab.iid_of(path, task) == iid
    assert gitlab.iid_of(path + "x", task) is None  # another project's id is not ours
    if len(task) < 100:
        assert task == f"{path}#{iid}"  # short paths stay readable as they are


def test_a_deep_subgroup_path_maps_to_a_valid_task() -> None:
    path = "/".join(["platform-engineering-and-operations"] * 6) + "/service"
    item = {"iid": 12, "title": "Long path", "state": "opened", "references": {"full": "x"}}
    issue = gitlab.tracked(path, item)
    assert len(issue.task_id.encode()) <= 128
    assert issue.task_id.startswith("platform-engineering-and-operations/")
    assert issue.task_id.endswith("#12")
    assert mapped(issue).taskId == issue.task_id
    assert gitlab.iid_of(path, issue.task_id) == 12


def test_a_github_repository_at_its_longest_has_a_task_id() -> None:
    repo = f"{'o' * 39}/{'r' * 100}"
    task = github.task_id(repo, 123456)
    assert len(task) <= 128
    assert github.number_of(repo, task) == 123456
