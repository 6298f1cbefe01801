"""Settings of a GitHub endpoint (``[endpoints.github]``) and its default status rules."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from cotal_tasks.core import TaskStatus
from cotal_tasks.providers.hosted.config import StatusRule, http_url
from cotal_tasks.providers.hosted.readback import ReadsBackWrites
from cotal_tasks.providers.hosted.writeback import status_labels

PROJECT_STATUS = "project_status"  # NativeState.extra: the Projects v2 Status


class GitHubStatusRule(StatusRule):
    """A status rule that may also ask for the issue's Projects v2 Status."""

    project_status: str | None = None  # case-insensitive

    def native_conditions(self) -> Mapping[str, str]:
        return {} if self.project_status is None else {PROJECT_STATUS: self.project_status}


# The status labels, declared once: write-back writes them, the default rules read them.
CLAIMED_LABEL, BLOCKED_LABEL = "in-progress", "blocked"
# GitHub keeps a state_reason with the state: why an issue closed, or that it reopened.
CLOSE_REASONS: dict[TaskStatus, str] = {
    "done": "completed",
    "dropped": "not_planned",
    "open": "reopened",
}


def github_default_rules(
    claimed: str | None = CLAIMED_LABEL, blocked: str | None = BLOCKED_LABEL
) -> tuple[GitHubStatusRule, ...]:
    """The default rules, reading the status labels write-back writes."""
    rule = GitHubStatusRule
    return (
        rule(status="dropped", state="closed", state_reasons=("not_planned", "duplicate")),
        rule(status="done", state="closed"),
        *([rule(status="blocked", state="open", label=blocked)] if blocked else []),
        rule(status="blocked", state="open", project_status="Blocked"),
        *([rule(status="claimed", state="open", label=claimed)] if claimed else []),
        rule(status="claimed", state="open", project_status="In Progress"),
        rule(status="open", state="open"),
    )


_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def _repository_name(value: str) -> str:
    """A repository as GitHub names it, ``OWNER/NAME``; refused in words, never by a pattern."""
    if not _REPOSITORY.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not OWNER/NAME (letters, digits, '.', '-' and '_' on each "
            "side of one '/'). Give the repository as GitHub shows it, such as "
            "octo-org/hello-world"
        )
    return value


Repository = Annotated[str, AfterValidator(_repository_name)]
MAX_SOURCES = 500  # repositories one endpoint reads
_ACCOUNT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
DISCOVERED_KEYS = ("include", "exclude", "include_archived")  # an organization's or App's


def _account(value: str) -> str:
    if not _ACCOUNT.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not an organization login (letters, digits and '-'). Give "
            "it as GitHub shows it, such as octo-org"
        )
    return value


def _glob(value: str) -> str:
    """An include or exclude glob: it matches a repository's name, never its owner."""
    if "/" in value or not value:
        raise ValueError(
            f"{value[:80]!r}: include and exclude match the repository's name without its "
            "owner (fnmatch, case-insensitive). Write 'web-*', not 'acme/web-*'"
        )
    return value


Glob = Annotated[str, AfterValidator(_glob)]


class GitHubConfig(ReadsBackWrites):
    """``[endpoints.github]``: the repositories, the scope, and how their issues map."""

    OPENED = "open"
    CLOSE_REASONS = CLOSE_REASONS
    SCOPE_KEYS: ClassVar[frozenset[str]] = ReadsBackWrites.SCOPE_KEYS | {
        "milestone",
        "issue_type",
    }

    provider: Literal["github"] = "github"
    # One repository (``owner/name``), or several; ``repository`` is a list of one.
    repository: Repository | None = None
    repositories: Annotated[tuple[Repository, ...], Field(max_length=MAX_SOURCES)] = ()
    # Or the repositories discovered (``github.discovery``): an organization's, or those
    # a GitHub App installation's token can read, picked by name with include/exclude
    # globs, archived ones skipped unless include_archived, listed again every
    # discover_interval_s (0: at start only) so a repository created later joins.
    organization: Annotated[str, AfterValidator(_account)] | None = None
    installation: bool = False
    include: tuple[Glob, ...] = ()  # none: every repository
    exclude: tuple[Glob, ...] = ()
    include_archived: bool = False
    discover_interval_s: Annotated[float, Field(ge=0)] = 600.0
    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"
    claimed_label: str | None = CLAIMED_LABEL
    blocked_label: str | None = BLOCKED_LABEL
    # Default: ``github_default_rules`` over the two labels above.
    status_rules: tuple[GitHubStatusRule, ...] = Field(default_factory=github_default_rules)
    # Read each issue's Projects v2 "Status" (GraphQL, one request per page of issues) so
    # project_status rules can match. Off by default: it costs a request per page.
    project_status: bool = False
    graphql_url: str | None = None  # default: derived from api_url
    # Read the repository's issue events feed (conditionally: a 304 is not counted by
    # GitHub's rate limit) for commits that reference an issue without changing it: in a
    # poll whose listing changed or after a webhook delivery named the repository, else
    # every ``reference_events_interval_s`` (``github.cadence``). Off: never.
    reference_events: bool = True
    reference_events_interval_s: Annotated[float, Field(gt=0)] = 300.0
    # Each poll, read the link counts of the next 100 open issues (one GraphQL request,
    # wrapping to the first after the last) and read again each issue whose count moved:
    # finds what only a timeline shows (another repository's pull request) within
    # ceil(open issues / 100) polls. Off: it costs a counted request every poll.
    reference_sweep: bool = False

    @field_validator("graphql_url")
    @classmethod
    def _graphql_url(cls, value: str | None) -> str | None:
        return value if value is None else http_url(value)

    @model_validator(mode="before")
    @classmethod
    def _one_list_of_sources(cls, data: Any) -> Any:
        if isinstance(data, dict):
            _one_kind_of_sources(data)
        return data

    @model_validator(mode="before")
    @classmethod
    def _rules_read_the_labels(cls, data: Any) -> Any:
        """Default rules read the configured labels, not the default ones."""
        if isinstance(data, dict) and "status_rules" not in data:
            claimed = data.get("claimed_label", CLAIMED_LABEL)
            blocked = data.get("blocked_label", BLOCKED_LABEL)
            if (claimed, blocked) != (CLAIMED_LABEL, BLOCKED_LABEL):
                data = {**data, "status_rules": github_default_rules(claimed, blocked)}
        return data

    @model_validator(mode="after")
    def _route_is_discovered(self) -> GitHubConfig:
        route = self.route
        if route is None or self.discovery is None:
            return self
        owner, _, name = _repository_name(route).partition("/")
        org = self.organization
        if (org is not None and owner.casefold() != org.casefold()) or not self.picks(name):
            raise ValueError(
                f"route {route!r} is not a repository the {self.discovery} source takes "
                "(its owner, and include/exclude). Name one it takes"
            )
        return self

    def status_labels(self) -> dict[TaskStatus, str]:
        """Status -> the label write-back writes for it."""
        return status_labels(claimed=self.claimed_label, blocked=self.blocked_label)

    def listing_filters(self) -> dict[str, str]:
        """The scope's filters GitHub's issue listing takes: ``labels`` (all of, comma
        separated: a name with a comma is checked locally only), ``type`` (by name) and an
        ``assignee`` account. The milestone filter takes a number, not a title, and the
        excluded labels and "no assignee but the seats" have none: those are checked locally
        (``hosted.scope``), like every filter."""
        scope = self.scope
        filters: dict[str, str] = {}
        labels = [name for name in scope.labels if "," not in name]
        if labels:
            filters["labels"] = ",".join(labels)
        if scope.issue_type:
            filters["type"] = scope.issue_type
        if scope.account is not None:
            filters["assignee"] = scope.account
        return filters

    def graphql_endpoint(self) -> str:
        if self.graphql_url is not None:
            return self.graphql_url
        base = self.api_url.rstrip("/")
        if base.endswith("/api/v3"):  # GitHub Enterprise Server
            return base.removesuffix("/v3") + "/graphql"
        return base + "/graphql"

    @property
    def sources(self) -> tuple[str, ...]:
        """The repositories listed (discovered ones are not: ``discovery``)."""
        return self.repositories or ((self.repository,) if self.repository else ())

    @property
    def location(self) -> str:
        if self.installation:
            return "installation"
        return self.organization or self.sources[0]

    @property
    def discovery(self) -> str | None:
        if self.installation:
            return "the App installation"
        return None if self.organization is None else f"organization {self.organization}"

    def picking(self) -> str:
        every = f"every {self.discover_interval_s:g} s" if self.discover_interval_s else "at start"
        return "; ".join(
            [
                f"names {', '.join(self.include)}" if self.include else "every name",
                *([f"not {', '.join(self.exclude)}"] if self.exclude else []),
                "archived ones too" if self.include_archived else "archived ones skipped",
                f"listed {every}",
            ]
        )

    def picks(self, name: str) -> bool:
        """Whether a repository's ``name`` (without its owner) passes include/exclude."""
        folded = name.casefold()
        included = not self.include or any(
            fnmatch.fnmatchcase(folded, glob.casefold()) for glob in self.include
        )
        return included and not any(
            fnmatch.fnmatchcase(folded, glob.casefold()) for glob in self.exclude
        )

    @property
    def task_link(self) -> str:
        """The web page of a task's issue, ``{number}`` standing for the issue number and,
        with several repositories, ``{path}`` for the repository (the task id before
        ``#``); the dashboard links each card to it. github.com, or GitHub Enterprise
        Server's host."""
        base = self.api_url.rstrip("/")
        web = "https://github.com" if base == "https://api.github.com" else base
        path = self.sources[0] if len(self.sources) == 1 and not self.discovery else "{path}"
        return f"{web.removesuffix('/api/v3')}/{path}/issues/{{number}}"


def _one_kind_of_sources(data: dict[str, Any]) -> None:
    """The repositories are named once: ``repository``, ``repositories``, an
    ``organization`` or the App ``installation``; include/exclude only with the last two.
    Listed repositories and discovered ones are not mixed: the leave rule of a discovered
    repository (it leaves when discovery no longer lists it) would not hold for a listed
    one, so a repository outside the organization is another endpoint's."""
    one, many = data.get("repository"), data.get("repositories")
    org, app = data.get("organization"), bool(data.get("installation"))
    given = [
        key
        for key, value in (
            ("repository", one is not None),
            ("repositories", bool(many)),
            ("organization", org is not None),
            ("installation", app),
        )
        if value
    ]
    if not given:
        raise ValueError(
            'no repository. Set repository = "owner/name", repositories = ["owner/a", '
            '"owner/b"], organization = "owner" or installation = true'
        )
    if given == ["repository", "repositories"]:
        raise ValueError(
            "both repository and repositories are set. Keep one: repositories "
            "lists every repository, repository names a single one"
        )
    if len(given) > 1:
        raise ValueError(
            f"{' and '.join(given)} are set. Keep one: include/exclude pick the repositories "
            "of an organization or installation; a repository elsewhere is another endpoint's"
        )
    if many and len({str(name).lower() for name in many}) != len(many):
        raise ValueError("repositories names a repository twice. Name each once")
    discovered = org is not None or app
    stray = [key for key in DISCOVERED_KEYS if key in data and not discovered]
    if stray:
        raise ValueError(
            f"{', '.join(stray)} pick(s) the repositories of an organization or installation. "
            'Set organization = "owner" (or installation = true), or list the repositories'
        )
    if discovered and data.get("route") is None:
        raise ValueError(
            "an organization or installation endpoint creates its tasks in one repository. "
            'Set route = "owner/name" (a repository it discovers)'
        )
