"""Settings of a Linear endpoint (``[endpoints.linear]``) and its default status rules.

A Linear endpoint mirrors the issues of one or more teams (by key), narrowed by a scope
pushed into Linear's own issue filter: a project, labels (all of them), the active cycle
or a cycle number, workflow state types. A Linear rule reads the workflow state's type
(``triage``, ``backlog``, ``unstarted``, ``started``, ``completed``, ``canceled``,
``duplicate``), its name and the labels; ``statusSource`` is the state's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule

TYPE = "type"  # NativeState.extra: the workflow state's type
STATE = "state"  # NativeState.extra: the workflow state's name
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
    teams: Annotated[tuple[TeamKey, ...], Field(min_length=1, max_length=20)]
    # The scope, pushed into Linear's issue filter: the project (its name or id), labels
    # the issue carries (all of them), a cycle ("active", or its number), state types.
    project: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    labels: Annotated[
        tuple[Annotated[str, Field(min_length=1, max_length=80)], ...], Field(max_length=10)
    ] = ()
    cycle: Literal["active"] | Annotated[int, Field(ge=1)] | None = None
    states: tuple[StateType, ...] = ()
    create_team: TeamKey | None = None  # where create-task makes issues (the first team)
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

    @model_validator(mode="after")
    def _consistent(self) -> LinearConfig:
        if len(set(self.teams)) != len(self.teams):
            raise ValueError("teams names a team twice. List each team key once")
        if self.create_team is not None and self.create_team not in self.teams:
            raise ValueError(
                f"create_team {self.create_team!r} is not one of teams. Set it to one of "
                f"{', '.join(self.teams)}"
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
    def location(self) -> str:
        return "+".join(self.teams)

    @property
    def home_team(self) -> str:
        return self.create_team or self.teams[0]
