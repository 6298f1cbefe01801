"""Settings of a GitLab endpoint (``[endpoints.gitlab]``) and its default status rules."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from cotal_tasks.core import TaskStatus
from cotal_tasks.providers.hosted.config import StatusRule, one_list_of_sources
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


# A project of several: its path (``group/project``); a numeric id only as ``project``.
ProjectPath = Annotated[str, Field(pattern=r"^[\w.-]+(/[\w.-]+)+$", max_length=255)]
MAX_SOURCES = 500  # projects one endpoint reads
# GitLab's issue types (``issue_type`` on the listing and on create).
ISSUE_TYPES = ("issue", "incident", "test_case", "task")


class GitLabConfig(ReadsBackWrites):
    """``[endpoints.gitlab]``: the projects, the scope, and how their issues map."""

    OPENED = "opened"
    SCOPE_KEYS: ClassVar[frozenset[str]] = ReadsBackWrites.SCOPE_KEYS | {
        "milestone",
        "issue_type",
    }

    provider: Literal["gitlab"] = "gitlab"
    # One project ("group/project" path or numeric id), or several paths; ``project`` is
    # a list of one.
    project: Annotated[str, Field(min_length=1)] | None = None
    projects: Annotated[tuple[ProjectPath, ...], Field(max_length=MAX_SOURCES)] = ()
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
    def _one_list_of_projects(cls, data: Any) -> Any:
        return one_list_of_sources(data, "project", "projects", "group/project", "group/a")

    @model_validator(mode="after")
    def _issue_type_is_gitlabs(self) -> Self:
        wanted = self.scope.issue_type
        if wanted is not None and wanted.lower() not in ISSUE_TYPES:
            raise ValueError(
                f"the scope's issue_type {wanted!r} is not a GitLab issue type. "
                f"Use one of {', '.join(ISSUE_TYPES)}"
            )
        return self

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

    def listing_filters(self) -> dict[str, str]:
        """The scope's filters GitLab's issue listing takes: ``labels`` (all of, comma
        separated: a name with a comma is checked locally only), ``not[labels]`` (none of
        them), ``milestone`` (by title), ``issue_type`` and ``assignee_username``. "No
        assignee but the seats" has none (a seat's claim keeps its issue in): it is checked
        locally (``hosted.scope``), like every filter."""
        scope = self.scope
        filters: dict[str, str] = {}
        labels = [name for name in scope.labels if "," not in name]
        if labels:
            filters["labels"] = ",".join(labels)
        excluded = [name for name in scope.exclude_labels if "," not in name]
        if excluded:
            filters["not[labels]"] = ",".join(excluded)
        if scope.milestone:
            filters["milestone"] = scope.milestone
        if scope.issue_type:
            filters["issue_type"] = scope.issue_type.lower()
        if scope.account is not None:
            filters["assignee_username"] = scope.account
        return filters

    @property
    def sources(self) -> tuple[str, ...]:
        return self.projects or (self.project or "",)

    @property
    def location(self) -> str:
        return self.sources[0]

    @property
    def task_link(self) -> str | None:
        """The web page of a task's issue, ``{number}`` standing for its iid and, with
        several projects, ``{path}`` for the project (the task id before ``#``); the
        dashboard links each card to it. ``None`` when the project is named by its
        numeric id."""
        if self.location.isdigit():
            return None
        web = self.api_url.rstrip("/").removesuffix("/api/v4")
        path = self.location if len(self.sources) == 1 else "{path}"
        return f"{web}/{path}/-/issues/{{number}}"
