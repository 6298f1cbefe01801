"""The write plan in tracker terms: each tracker's labels and close reasons come from its
own folder; the shared planner turns a record's change into them."""

from __future__ import annotations

from cotal_tasks.core import Task
from cotal_tasks.providers.github.config import CLOSE_REASONS
from cotal_tasks.providers.hosted.writeback import (
    WritePlan,
    plan_change,
    plan_new,
    status_labels,
)
from tests.providers.conftest import new_task

GITHUB = WritePlan(status_labels(claimed="in-progress", blocked="blocked"), CLOSE_REASONS)
GITLAB = WritePlan(
    status_labels(
        claimed="workflow::in progress", blocked="workflow::blocked", dropped="workflow::won't do"
    )
)


def at(status: str) -> Task:
    return new_task(1).model_copy(update={"status": status})


def test_github_closes_and_reopens_with_its_reasons() -> None:
    done = plan_change(at("open"), at("done"), plan=GITHUB, seats={}, note=None)
    assert (done.state, done.state_reason, done.reclose) == ("closed", "completed", False)
    dropped = plan_change(at("done"), at("dropped"), plan=GITHUB, seats={}, note=None)
    assert (dropped.state, dropped.state_reason, dropped.reclose) == ("closed", "not_planned", True)
    reopened = plan_change(at("dropped"), at("open"), plan=GITHUB, seats={}, note=None)
    assert (reopened.state, reopened.state_reason) == ("open", "reopened")
    assert not dropped.add_labels
    assert not reopened.remove_labels


def test_gitlab_says_dropped_with_its_label_and_keeps_no_reason() -> None:
    dropped = plan_change(at("open"), at("dropped"), plan=GITLAB, seats={}, note=None)
    assert (dropped.state, dropped.state_reason, dropped.reclose) == ("closed", None, False)
    assert dropped.add_labels == ("workflow::won't do",)
    reopened = plan_change(at("dropped"), at("open"), plan=GITLAB, seats={}, note=None)
    assert (reopened.state, reopened.state_reason) == ("open", None)
    assert reopened.remove_labels == ("workflow::won't do",)
    done = plan_change(at("dropped"), at("done"), plan=GITLAB, seats={}, note=None)
    assert done.state is None  # closed either way; only the label goes
    assert done.remove_labels == ("workflow::won't do",)


def test_a_new_issue_is_created_as_the_tracker_says_its_status() -> None:
    issue, follow = plan_new(at("dropped"), GITLAB)
    assert issue.labels == ("workflow::won't do",)
    assert (follow.state, follow.state_reason) == ("closed", None)
    issue, follow = plan_new(at("dropped"), GITHUB)
    assert issue.labels == ()
    assert (follow.state, follow.state_reason) == ("closed", "not_planned")
    issue, follow = plan_new(at("open"), GITHUB)
    assert not follow
