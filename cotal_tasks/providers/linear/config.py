"""Settings of a Linear endpoint (``[endpoints.linear]``) and its default status rules.

A Linear endpoint mirrors the issues of one or more teams (``teams``, or ``team`` as a
list of one), each team a source of its own (``hosted.sources``), narrowed by one scope:
the shared ``[scope]`` (labels, excluded labels, an assignee, the import horizon) and
Linear's own keys beside it (a project, the active cycle or a cycle number, workflow
state types). What Linear's ``IssueFilter`` can say is pushed into it; every issue is
checked here all the same (``outside_natively``), so an issue that leaves the slice is
seen leaving (``hosted.scope``). A Linear rule reads the workflow state's type
(``triage``, ``backlog``, ``unstarted``, ``started``, ``completed``, ``canceled``,
``duplicate``), its name and the labels; ``statusSource`` is the state's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule, one_list_of_sources
from cotal_tasks.providers.hosted.tracker import TrackedIssue

TYPE = "type"  # NativeState.extra: the workflow state's type
STATE = "state"  # NativeState.extra: the workflow state's name
# NativeState.extra, what the scope's Linear keys read: the issue's team (key), its
# identifier now, its project (id and name) and its cycle (number, and "true" when active).
TEAM = "team"
NOW = "identifier"
PROJECT_ID = "project-id"
PROJECT = "project"
CYCLE = "cycle"
CYCLE_ACTIVE = "cycle-active"
StateType = Literal[
    "triage", "backlog", "unstarted", "started", "completed", "canceled", "duplicate"
]
CLOSED_TYPES = frozenset({"completed", "canceled", "duplicate"})
# A team key as task ids carry it (``ENG`` of ``ENG-123``): a letter, then letters or
# digits, at most 6 (the task's number packs the key: ``mapping.number_of``).
TeamKey = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9]{0,5}$")]
_GENERIC = {
    "state": "state_type (triage, backlog, unstarted, started, completed, canceled, duplicate)",
    "state_reasons": "state_type or state_name",
}
_ACCOUNT = re.compile(r"^[A-Za-z0-9-]{8,64}$")


class LinearStatusRule(StatusRule):
    """``status`` when the issue's workflow state type, state name and label all match
    what the rule gives (names case-insensitive)."""

    state_type: StateType | None = None
    state_name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _linear_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for generic, linear in _GENERIC.items():
                if data.get(generic) not in (None, (), []):
                    raise ValueError(
                        f"a Linear status rule reads {linear}, not {generic}. Write that key "
                        "instead"
                    )
        return data

    def native_conditions(self) -> Mapping[str, str]:
        conditions: dict[str, str] = {}
        if self.state_type is not None:
            conditions[TYPE] = self.state_type
        if self.state_name is not None:
            conditions[STATE] = self.state_name
        return conditions


def rule(status: str, **conditions: Any) -> LinearStatusRule:
    return LinearStatusRule.model_validate({"status": status, **conditions})


def linear_default_rules() -> tuple[LinearStatusRule, ...]:
    return (
        rule("dropped", state_type="canceled"),
        rule("dropped", state_type="duplicate"),
        rule("done", state_type="completed"),
        rule("blocked", label="Blocked"),
        rule("blocked", state_name="Blocked"),
        rule("claimed", state_type="started"),
        rule("open"),  # triage, backlog, unstarted
    )


class LinearConfig(HostedConfig):
    """``[endpoints.linear]``: the teams, the scope and how their issues map."""

    provider: Literal["linear"] = "linear"
    api_url: str = "https://api.linear.app/graphql"  # checked by HostedConfig (http_url)
    # ``api-key``: a personal API key (sent bare); ``oauth``: an OAuth access token (sent
    # as ``Bearer``), an app's ``actor=app`` token for agents included.
    auth: Literal["api-key", "oauth"] = "api-key"
    token_env: str = "LINEAR_API_KEY"
    # The teams (keys), each a source with its own sync; ``team``: a list of one.
    team: TeamKey | None = None
    teams: Annotated[tuple[TeamKey, ...], Field(max_length=20)] = ()
    # Linear's own scope keys, beside ``[scope]``: the project (its name or id), a cycle
    # ("active", or its number), workflow state types. Pushed into Linear's issue filter
    # on an import, and checked on every issue read (``outside_natively``).
    project: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    cycle: Literal["active"] | Annotated[int, Field(ge=1)] | None = None
    states: tuple[StateType, ...] = ()
    # Where create-task makes issues (Linear's name for ``route``; default the first team).
    create_team: TeamKey | None = None
    status_rules: tuple[LinearStatusRule, ...] = Field(default_factory=linear_default_rules)
    blocked_label: str | None = "Blocked"
    # Where write-back moves an issue: the state's name, or ``None`` for the team's
    # first state (by position) of the type (started, unstarted, completed, canceled).
    claimed_state: str | None = None
    open_state: str | None = None
    done_state: str | None = None
    dropped_state: str | None = None
    page_size: Annotated[int, Field(ge=1, le=100)] = 50
    mutation_spacing_s: Annotated[float, Field(ge=0)] = 0.2

    @model_validator(mode="before")
    @classmethod
    def _one_list_of_teams(cls, data: Any) -> Any:
        if isinstance(data, dict) and "labels" in data:
            raise ValueError(
                "labels is a key of the scope. Write it under [endpoints.linear.scope] "
                "(labels = [...]), beside exclude_labels, assignee and horizon_days"
            )
        if isinstance(data, dict) and data.get("create_team") is not None and data.get("route"):
            raise ValueError("both create_team and route are set. Keep create_team")
        return one_list_of_sources(data, "team", "teams", "ENG", "OPS")

    @model_validator(mode="after")
    def _consistent(self) -> LinearConfig:
        if self.create_team is not None and self.create_team not in self.sources:
            raise ValueError(
                f"create_team {self.create_team!r} is not one of teams. Set it to one of "
                f"{', '.join(self.sources)}"
            )
        for account in self.seats:
            if not _ACCOUNT.fullmatch(account):
                raise ValueError(
                    "seats are keyed by Linear user id (a UUID, as the API's "
                    "viewer { id } answers; an agent's app user id for delegation), never an "
                    "email or a display name. Fix the key"
                )
        return self

    @property
    def sources(self) -> tuple[str, ...]:
        return self.teams or ((self.team,) if self.team else ())

    @property
    def location(self) -> str:
        return self.sources[0]

    @property
    def routed(self) -> str:
        return self.create_team or super().routed

    def native_keys(self) -> list[str]:
        """Linear's own scope keys as ``check-config`` prints them."""
        return [
            *([f"project {self.project}"] if self.project else []),
            *([f"cycle {self.cycle}"] if self.cycle is not None else []),
            *([f"state types {', '.join(self.states)}"] if self.states else []),
        ]

    def outside_natively(self, issue: TrackedIssue) -> str | None:
        """Why ``issue`` is outside the endpoint by what Linear alone says (its team is
        none of the endpoint's, its project, its cycle, its state type), or ``None``. A
        closed issue (completed, canceled, duplicate) never leaves by its state type or
        its cycle: its status says it ended (done or dropped), and a finished cycle's
        issues are not taken away from the seats that did them."""
        extra = issue.native.extra
        team = extra.get(TEAM)
        if team and team not in self.sources:
            return f"moved to team {team} ({extra.get(NOW)})"
        if self.project is not None and self.project.casefold() not in (
            extra.get(PROJECT, "").casefold(),
            extra.get(PROJECT_ID, "").casefold(),
        ):
            return f"project {extra[PROJECT]}" if extra.get(PROJECT) else "no project"
        if issue.native.state == "closed":
            return None
        if self.cycle is not None:
            cycle = extra.get(CYCLE)
            if cycle is None:
                return "no cycle"
            if self.cycle == "active" and extra.get(CYCLE_ACTIVE) != "true":
                return f"cycle {cycle} not active"
            if self.cycle != "active" and cycle != str(self.cycle):
                return f"cycle {cycle}"
        if self.states and extra.get(TYPE) not in self.states:
            return f"state {extra.get(STATE)} ({extra.get(TYPE)})"
        return None
