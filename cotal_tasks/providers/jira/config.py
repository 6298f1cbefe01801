"""Settings of a Jira Cloud endpoint (``[endpoints.jira]``) and its default status rules.

A Jira rule reads the workflow status's category (``new`` / ``indeterminate`` / ``done``),
its name, the resolution and the labels. ``statusSource`` is the status name, with the
resolution when a rule asked for one (``Done/Won't Do``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule, one_list_of_sources

CATEGORY = "category"  # NativeState.extra: the status category key
STATUS = "status"  # NativeState.extra: the status name
Category = Literal["new", "indeterminate", "done"]
_GENERIC = {
    "state": "category (new, indeterminate or done)",
    "state_reasons": "resolutions (resolution names)",
}
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
MAX_SOURCES = 100  # projects one endpoint reads


class JiraStatusRule(StatusRule):
    """``status`` when the issue's status category, status name, resolution and label
    all match what the rule gives (names case-insensitive, resolutions exact)."""

    category: Category | None = None
    status_name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _jira_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for generic, jira in _GENERIC.items():
            if data.get(generic) not in (None, (), []):
                raise ValueError(
                    f"a Jira status rule reads {jira}, not {generic}. Write that key instead"
                )
        if "resolutions" in data:
            data = {**data, "state_reasons": tuple(data["resolutions"])}
            del data["resolutions"]
        return data

    def native_conditions(self) -> Mapping[str, str]:
        conditions: dict[str, str] = {}
        if self.category is not None:
            conditions[CATEGORY] = self.category
        if self.status_name is not None:
            conditions[STATUS] = self.status_name
        return conditions


def rule(status: str, **conditions: Any) -> JiraStatusRule:
    return JiraStatusRule.model_validate({"status": status, **conditions})


def jira_default_rules() -> tuple[JiraStatusRule, ...]:
    return (
        rule("dropped", category="done", resolutions=("Won't Do", "Duplicate", "Cannot Reproduce")),
        rule("done", category="done"),
        rule("blocked", label="blocked"),
        rule("blocked", status_name="Blocked"),
        rule("claimed", category="indeterminate"),
        rule("open", category="new"),
    )


_PROJECT_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,254}")


def _key(value: str) -> str:
    """A Jira project key, or refused naming what one looks like."""
    if not _PROJECT_KEY.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a Jira project key (capital letters, digits and _, "
            "starting with a letter). Give the key Jira shows, such as ACME"
        )
    return value


class JiraConfig(HostedConfig):
    """``[endpoints.jira]``: the site, the projects, the scope and how their issues map."""

    # The scope's milestone is the issue's fix version; its issue type, the issue type.
    SCOPE_KEYS: ClassVar[frozenset[str]] = HostedConfig.SCOPE_KEYS | {"milestone", "issue_type"}

    provider: Literal["jira"] = "jira"
    # The site (``https://acme.atlassian.net``); with OAuth 2.0 (3LO),
    # ``https://api.atlassian.com/ex/jira/<cloud id>``.
    api_url: str  # checked by HostedConfig (http_url)
    # One project's key, or several; ``project`` is a list of one.
    project: str | None = None
    projects: Annotated[tuple[str, ...], Field(max_length=MAX_SOURCES)] = ()
    # ``basic``: ``email`` and the API token in ``token_env``; ``bearer``: an OAuth token.
    auth: Literal["basic", "bearer"] = "basic"
    email: str | None = None
    token_env: str = "JIRA_API_TOKEN"
    jql: Annotated[str, Field(max_length=2000)] | None = None  # narrows what is mirrored
    status_rules: tuple[JiraStatusRule, ...] = Field(default_factory=jira_default_rules)
    claimed_label: None = None  # a claim moves the issue through the workflow instead
    blocked_label: str | None = "blocked"
    # Where write-back moves an issue: the status name, or ``None`` for the first
    # transition into the category (In Progress, To Do, Done).
    claimed_status: str | None = None
    open_status: str | None = None
    done_status: str | None = None
    done_resolution: str = "Done"
    dropped_resolution: str = "Won't Do"
    # What create-task makes (the scope's issue type, when it names one).
    issue_type: str = "Task"
    page_size: Annotated[int, Field(ge=1, le=100)] = 100
    # Read each changed issue's remote links (one request per changed issue) for the pull
    # requests, commits and CI runs they point to.
    remote_links: bool = True
    # Issues with an issue security level are withheld from the board (which every
    # tasks.read holder can read) unless the operator opts in here.
    include_secured: bool = False
    mutation_spacing_s: Annotated[float, Field(ge=0)] = 0.2

    @field_validator("project")
    @classmethod
    def _project_key(cls, value: str | None) -> str | None:
        return None if value is None else _key(value)

    @field_validator("projects")
    @classmethod
    def _project_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_key(key) for key in value)

    @model_validator(mode="before")
    @classmethod
    def _one_list_of_projects(cls, data: Any) -> Any:
        return one_list_of_sources(data, "project", "projects", "ENG", "OPS")

    @model_validator(mode="after")
    def _consistent(self) -> JiraConfig:
        if self.auth == "basic" and not self.email:
            raise ValueError(
                'email is required with auth = "basic": set email to the Atlassian account '
                'that owns the API token in token_env, or set auth = "bearer" for an OAuth '
                "access token"
            )
        if self.auth == "bearer" and self.email:
            raise ValueError(
                'email is only used with auth = "basic": remove it, or set auth = "basic"'
            )
        if self.jql is not None and _ORDER_BY.search(self.jql):
            raise ValueError(
                "jql must not order the issues: the sync orders by updated and key. Remove "
                "its ORDER BY clause"
            )
        for account in self.seats:
            if not re.fullmatch(r"[A-Za-z0-9:_-]{1,128}", account):
                raise ValueError(
                    "seats are keyed by Atlassian accountId (as in 5b10a2844c20165700ede21g or "
                    "712020:0f7e…), never an email or a display name. Fix the key"
                )
        return self

    def scope_clauses(self, horizon: str | None = None) -> list[str]:
        """The scope as JQL clauses (ANDed): every label, none of the excluded ones (an
        issue with no label has none of them), the fix version as the milestone, the
        issue type, the assignee's account, and with ``horizon`` (a JQL minute) the open
        issues plus those changed since it. "No assignee but the seats" has no clause: it
        is checked locally (``hosted.scope``), like every filter."""
        scope = self.scope
        clauses = [f"labels = {_quoted(name)}" for name in scope.labels]
        if scope.exclude_labels:
            names = ", ".join(_quoted(name) for name in scope.exclude_labels)
            clauses.append(f"(labels IS EMPTY OR labels NOT IN ({names}))")
        if scope.milestone:
            clauses.append(f"fixVersion = {_quoted(scope.milestone)}")
        if scope.issue_type:
            clauses.append(f"issuetype = {_quoted(scope.issue_type)}")
        if scope.account is not None:
            clauses.append(f"assignee = {_quoted(scope.account)}")
        if horizon is not None:
            clauses.append(f'(statusCategory != Done OR updated >= "{horizon}")')
        return clauses

    @property
    def sources(self) -> tuple[str, ...]:
        return self.projects or (self.project or "",)

    @property
    def location(self) -> str:
        return self.sources[0]


def _quoted(value: str) -> str:
    """A JQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
