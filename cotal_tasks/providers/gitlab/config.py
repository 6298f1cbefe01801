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
# A group: its full path (``acme``, ``acme/platform``) or its numeric id.
GroupRef = Annotated[str, Field(pattern=r"^[\w.-]+(/[\w.-]+)*$", max_length=255)]
GROUP_KEYS = ("include_subgroups", "exclude_projects", "create_project")
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
    # Or a group (its path or numeric id), read as one source through GitLab's group
    # issue listing (``gitlab.group``): every project in it, subgroups included unless
    # ``include_subgroups = false``, less those ``exclude_projects`` (path globs) names.
    # Created tasks go to ``create_project``, a project of the group (none: refused).
    group: GroupRef | None = None
    include_subgroups: bool = True
    exclude_projects: Annotated[tuple[str, ...], Field(max_length=MAX_SOURCES)] = ()
    create_project: ProjectPath | None = None
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
    # The merge-request sweep (merge requests changed since the last one, for the issues
    # they name) runs in a poll whose issue listing changed, after a Merge Request or
    # Push Hook named the project, and otherwise once every this many seconds: an
    # unchanged poll between costs one request a source (``hosted.cadence``).
    merge_requests_interval_s: Annotated[float, Field(gt=0)] = 300.0

    @model_validator(mode="before")
    @classmethod
    def _one_list_of_projects(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("group") is not None:
            return _one_group(data)
        if isinstance(data, dict) and (given := [k for k in GROUP_KEYS if k in data]):
            raise ValueError(
                f'{given[0]} applies to a group endpoint only. Set group = "acme" to read '
                "a group, or leave it out (with project or projects, route names where "
                "created tasks go)"
            )
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
        if self.group is not None:
            return (self.group,)
        return self.projects or (self.project or "",)

    def source_lines(self) -> list[str]:
        if self.group is None:
            return super().source_lines()
        subgroups = "subgroups included" if self.include_subgroups else "no subgroups"
        excluded = f", except {', '.join(self.exclude_projects)}" if self.exclude_projects else ""
        created = f"created in {self.create_project}" if self.create_project else "no create-task"
        return [f"group {self.group} ({subgroups}{excluded}); {created}"]

    @property
    def location(self) -> str:
        return self.sources[0]

    @property
    def task_link(self) -> str | None:
        """The web page of a task's issue, ``{number}`` standing for its iid and, with
        several projects, ``{path}`` for the project (the task id before ``#``); the
        dashboard links each card to it. ``None`` when the project is named by its
        numeric id."""
        several = len(self.sources) > 1 or self.group is not None
        if self.location.isdigit() and not several:
            return None
        web = self.api_url.rstrip("/").removesuffix("/api/v4")
        path = "{path}" if several else self.location
        return f"{web}/{path}/-/issues/{{number}}"


def _one_group(data: dict[str, Any]) -> dict[str, Any]:
    """A group endpoint's settings, refused where they cannot work: a group is one
    source, so it takes neither ``project``/``projects`` nor ``route`` (created tasks go
    to ``create_project``, a project of the group)."""
    group = str(data["group"])
    if data.get("project") is not None or data.get("projects"):
        raise ValueError(
            "both group and project(s) are set. Keep one: group reads every project in it "
            '(leave some out with exclude_projects = ["acme/sandbox"]); projects = [...] '
            "names each project read"
        )
    if data.get("route") is not None:
        raise ValueError(
            f"route names one of several sources; a group endpoint is one source. Set "
            f'create_project = "{group if not group.isdigit() else "acme"}/widgets" '
            "(a project of the group) for where create-task makes its issues"
        )
    create = data.get("create_project")
    if isinstance(create, str) and not group.isdigit():
        inside = create.lower().startswith(group.lower() + "/")
        direct = "/" not in create[len(group) + 1 :]
        if not inside or (data.get("include_subgroups") is False and not direct):
            where = "in" if data.get("include_subgroups", True) else "directly in"
            raise ValueError(
                f"create_project {create!r} is not {where} group {group}, so its issues "
                f"would leave the endpoint's scope at once. Name a project {where} the group"
            )
    return data
