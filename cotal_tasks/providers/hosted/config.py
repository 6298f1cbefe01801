"""Settings of the hosted trackers: what to sync, how to map it, what to write back.

Tokens and webhook secrets are named by environment variable (``*_env``), never held
in the file. Status rules are ordered: the first rule whose every condition matches an
issue decides its status, and the native value that decided it becomes ``statusSource``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from cotal_tasks.core import TaskStatus
from cotal_tasks.core.identity import Principal


class Closed(BaseModel):
    """Base of the settings models: closed and frozen; a refused value is never quoted."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class StatusRule(Closed):
    """``status`` when every given condition holds (an empty rule always matches)."""

    status: TaskStatus
    state: str | None = None  # GitHub open|closed, GitLab opened|closed
    state_reasons: tuple[str, ...] = ()  # GitHub state_reason, any of; "none" matches null
    label: str | None = None  # the issue carries this label (case-insensitive)
    project_status: str | None = None  # GitHub Projects v2 Status (case-insensitive)


class HostedConfig(Closed):
    """What every hosted tracker shares."""

    api_url: str
    token_env: str
    webhook_secret_env: str | None = None
    poll_interval_s: Annotated[float, Field(gt=0)] = 60.0
    stale_after_s: Annotated[float, Field(gt=0)] = 300.0
    overlap_s: Annotated[float, Field(ge=0)] = 5.0
    request_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    max_rate_limit_wait_s: Annotated[float, Field(ge=0)] = 900.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 5
    mutation_spacing_s: Annotated[float, Field(ge=0)] = 1.0  # between writes, per tracker advice
    claimed_label: str | None = "in-progress"
    blocked_label: str | None = "blocked"
    # Tracker account (login or username) -> seat principal owner.actor. Only these
    # accounts can ever produce a binding; every other assignee is a human.
    seats: dict[str, Principal] = Field(default_factory=dict)
    status_rules: tuple[StatusRule, ...] = ()
    # How often the sync also lists the open issues and reads, one by one, the mirrored
    # unfinished tasks whose issue is not among them (deleted or transferred issues leave
    # the listing without changing anything the poll sees). 0: never.
    reconcile_interval_s: Annotated[float, Field(ge=0)] = 3600.0


def github_default_rules() -> tuple[StatusRule, ...]:
    return (
        StatusRule(status="dropped", state="closed", state_reasons=("not_planned", "duplicate")),
        StatusRule(status="done", state="closed"),
        StatusRule(status="blocked", state="open", label="blocked"),
        StatusRule(status="blocked", state="open", project_status="Blocked"),
        StatusRule(status="claimed", state="open", label="in-progress"),
        StatusRule(status="claimed", state="open", project_status="In Progress"),
        StatusRule(status="open", state="open"),
    )


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


class GitHubConfig(HostedConfig):
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")]
    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"
    status_rules: tuple[StatusRule, ...] = Field(default_factory=github_default_rules)
    # Read each issue's Projects v2 "Status" (GraphQL, one request per page of issues) so
    # project_status rules can match. Off by default: it costs a request per page.
    project_status: bool = False
    graphql_url: str | None = None  # default: derived from api_url
    # Read the repository's issue events feed each poll (conditionally: a 304 is not
    # counted by GitHub's rate limit) for commits that reference an issue without
    # changing it. Off: an unchanged poll is one request instead of two.
    reference_events: bool = True

    def graphql_endpoint(self) -> str:
        if self.graphql_url is not None:
            return self.graphql_url
        base = self.api_url.rstrip("/")
        if base.endswith("/api/v3"):  # GitHub Enterprise Server
            return base.removesuffix("/v3") + "/graphql"
        return base + "/graphql"


class GitLabConfig(HostedConfig):
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
