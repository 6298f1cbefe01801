"""Settings of a GitLab endpoint (``[endpoints.gitlab]``) and its default status rules."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from cotal_tasks.core import TaskStatus
from cotal_tasks.providers.hosted.config import StatusRule
from cotal_tasks.providers.hosted.readback import ReadsBackWrites
from cotal_tasks.providers.hosted.writeback import status_labels

# The status labels, declared once: write-back writes them, the default rules read them.
CLAIMED_LABEL = "workflow::in progress"
BLOCKED_LABEL = "workflow::blocked"
DROPPED_LABEL = "workflow::won't do"
_LABELS = {
    "claimed_label": CLAIMED_LABEL,
    "blocked_label": BLOCKED_LABEL,
    "dropped_label": DROPPED_LABEL,
}


def gitlab_default_rules(
    claimed: str | None = CLAIMED_LABEL,
    blocked: str | None = BLOCKED_LABEL,
    dropped: str | None = DROPPED_LABEL,
) -> tuple[StatusRule, ...]:
    """The default rules, reading the status labels write-back writes."""
    rule = StatusRule
    return (
        rule(status="dropped", state="closed", state_reasons=("duplicate",)),
        *([rule(status="dropped", state="closed", label=dropped)] if dropped else []),
        rule(status="dropped", state="closed", label="workflow::cancelled"),
        rule(status="done", state="closed"),
        *([rule(status="blocked", state="opened", label=blocked)] if blocked else []),
        *([rule(status="claimed", state="opened", label=claimed)] if claimed else []),
        rule(status="claimed", state="opened", label="workflow::in review"),
        rule(status="open", state="opened"),
    )


class GitLabConfig(ReadsBackWrites):
    """``[endpoints.gitlab]``: the project and how its issues map."""

    OPENED = "opened"

    provider: Literal["gitlab"] = "gitlab"
    project: Annotated[str, Field(min_length=1)]  # "group/project" path or numeric id
    api_url: str = "https://gitlab.com/api/v4"
    token_env: str = "GITLAB_TOKEN"
    claimed_label: str | None = CLAIMED_LABEL
    blocked_label: str | None = BLOCKED_LABEL
    dropped_label: str | None = DROPPED_LABEL
    # Default: ``gitlab_default_rules`` over the three labels above.
    status_rules: tuple[StatusRule, ...] = Field(default_factory=gitlab_default_rules)
    pagination: Literal["auto", "keyset", "offset"] = "auto"
    # Confidential issues are withheld from the board (which every tasks.read holder can
    # read) unless the operator opts in here.
    include_confidential: bool = False
    # GitLab Free keeps one assignee per issue. ``true``: claim by the claimed label alone
    # while someone else is assigned (a human assignee is never replaced); ``None``: learn
    # it from the first claim GitLab answers with only the first assignee kept.
    single_assignee: bool | None = None
    # Read the notes of every changed issue for the commits that mention it without a
    # merge request (GitLab shows those only as system notes): one request per changed
    # issue (more past 100 notes). Off: only merge requests link commits.
    commit_mentions: bool = True

    @model_validator(mode="before")
    @classmethod
    def _rules_read_the_labels(cls, data: Any) -> Any:
        """Default rules read the configured labels, not the default ones."""
        if isinstance(data, dict) and "status_rules" not in data:
            labels = [data.get(key, default) for key, default in _LABELS.items()]
            if labels != list(_LABELS.values()):
                data = {**data, "status_rules": gitlab_default_rules(*labels)}
        return data

    def status_labels(self) -> dict[TaskStatus, str]:
        """Status -> the label write-back writes for it (GitLab keeps no close reason:
        the dropped label says "dropped")."""
        return status_labels(
            claimed=self.claimed_label, blocked=self.blocked_label, dropped=self.dropped_label
        )

    @property
    def location(self) -> str:
        return self.project

    @property
    def task_link(self) -> str | None:
        """The web page of a task's issue, ``{number}`` standing for its iid (the dashboard
        links each card to it); ``None`` when the project is named by its numeric id."""
        if self.project.isdigit():
            return None
        web = self.api_url.rstrip("/").removesuffix("/api/v4")
        return f"{web}/{self.project}/-/issues/{{number}}"
