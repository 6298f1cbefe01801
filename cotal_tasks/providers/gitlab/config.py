"""Settings of a GitLab endpoint (``[endpoints.gitlab]``) and its default status rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule


def gitlab_default_rules() -> tuple[StatusRule, ...]:
    return (
        StatusRule(status="dropped", state="closed", state_reasons=("duplicate",)),
        StatusRule(status="dropped", state="closed", label="workflow::won't do"),
        StatusRule(status="dropped", state="closed", label="workflow::cancelled"),
        StatusRule(status="done", state="closed"),
        StatusRule(status="blocked", state="opened", label="workflow::blocked"),
        StatusRule(status="claimed", state="opened", label="workflow::in progress"),
        StatusRule(status="claimed", state="opened", label="workflow::in review"),
        StatusRule(status="open", state="opened"),
    )


class GitLabConfig(HostedConfig):
    """``[endpoints.gitlab]``: the project and how its issues map."""

    provider: Literal["gitlab"] = "gitlab"
    project: Annotated[str, Field(min_length=1)]  # "group/project" path or numeric id
    api_url: str = "https://gitlab.com/api/v4"
    token_env: str = "GITLAB_TOKEN"
    claimed_label: str | None = "workflow::in progress"
    blocked_label: str | None = "workflow::blocked"
    dropped_label: str | None = "workflow::won't do"
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
