"""The status-rule engine over facts one tracker has and the others do not: GitHub's
Projects v2 Status is a GitHub rule's condition, read from ``NativeState.extra``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cotal_tasks.providers.github.config import PROJECT_STATUS, GitHubConfig
from cotal_tasks.providers.gitlab.config import GitLabConfig
from cotal_tasks.providers.hosted.mapping import evaluate
from cotal_tasks.providers.hosted.tracker import NativeState

DEFAULTS = GitHubConfig(repository="octo-org/hello-world").status_rules


@pytest.mark.parametrize(
    ("native", "status", "source"),
    [
        (NativeState("open", extra={PROJECT_STATUS: "Blocked"}), "blocked", "Blocked"),
        (NativeState("open", extra={PROJECT_STATUS: "in progress"}), "claimed", "in progress"),
        (NativeState("open", extra={PROJECT_STATUS: "Todo"}), "open", "open"),
        # a label rule comes first; a closed issue is decided by its state
        (
            NativeState("open", labels=("blocked",), extra={PROJECT_STATUS: "In Progress"}),
            "blocked",
            "blocked",
        ),
        (NativeState("closed", extra={PROJECT_STATUS: "In Progress"}), "done", "closed"),
    ],
)
def test_the_github_defaults_read_the_project_status(
    native: NativeState, status: str, source: str
) -> None:
    assert evaluate(DEFAULTS, native) == (status, source)


# What a configured rule set needs to read back what write-back writes (the defaults' labels).
READ_BACK = [
    {"status": "dropped", "state": "closed", "state_reasons": ["not_planned"]},
    {"status": "done", "state": "closed"},
    {"status": "blocked", "label": "blocked"},
]


def test_a_configured_project_status_rule_needs_that_fact() -> None:
    config = GitHubConfig.model_validate(
        {
            "repository": "octo-org/hello-world",
            "status_rules": [
                {"status": "blocked", "project_status": "Waiting"},
                *READ_BACK,
                {"status": "open"},
            ],
        }
    )
    waiting = NativeState("open", extra={PROJECT_STATUS: "WAITING"})
    assert evaluate(config.status_rules, waiting) == ("blocked", "WAITING")
    assert evaluate(config.status_rules, NativeState("open")) == ("open", "open")


def test_a_gitlab_rule_has_no_project_status() -> None:
    with pytest.raises(ValidationError, match="project_status"):
        GitLabConfig.model_validate(
            {
                "project": "acme/widgets",
                "status_rules": [{"status": "blocked", "project_status": "x"}],
            }
        )
