"""Settings of the hosted trackers: what to sync, how to map it, what to write back.

Tokens and webhook secrets are named by environment variable (``*_env``), never held
in the file. Status rules are ordered: the first rule whose every condition matches an
issue decides its status, and the native value that decided it becomes ``statusSource``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from cotal_tasks.core import TaskStatus
from cotal_tasks.core.identity import Principal
from cotal_tasks.core.masking import mask_credentials
from cotal_tasks.core.models import Settings
from cotal_tasks.providers.hosted.scope import Scope
from cotal_tasks.providers.hosted.tracker import TrackedIssue

Closed = Settings  # the settings base every provider shares (providers.provider)


class StatusRule(Closed):
    """``status`` when every given condition holds (an empty rule always matches)."""

    status: TaskStatus
    state: str | None = None  # GitHub open|closed, GitLab opened|closed
    state_reasons: tuple[str, ...] = ()  # GitHub state_reason, any of; "none" matches null
    label: str | None = None  # the issue carries this label (case-insensitive)

    def native_conditions(self) -> Mapping[str, str]:
        """Further native facts the rule asks for, by name (``NativeState.extra``), each
        matched case-insensitively: a tracker's own rule model adds them."""
        return {}


def http_url(value: str) -> str:
    """A tracker URL setting: ``http://`` or ``https://``, a host, no whitespace. Anything
    else is refused when the config loads (``127.0.0.1:8765`` without its scheme would
    only fail at the first request, as if the tracker did not answer)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        raise ValueError(
            f"{mask_credentials(value)!r} is not an http:// or https:// URL with a host. Give "
            "the tracker's API base URL with its scheme (https://…)"
        )
    return value


class HostedConfig(Closed):
    """What every hosted tracker shares."""

    api_url: str
    token_env: str
    webhook_secret_env: str | None = None
    poll_interval_s: Annotated[float, Field(gt=0)] = 60.0
    stale_after_s: Annotated[float, Field(gt=0)] = 300.0
    overlap_s: Annotated[float, Field(ge=0)] = 5.0
    # One attempt of one tracker request, whole: connect, headers and the body to its last
    # byte (a peer dripping a byte a second is cut here, not at its last byte).
    request_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # Deprecated (it bounded the attempt beside request_timeout_s, which bounded each
    # read): when still set, the attempt's one deadline is the smaller of the two.
    request_deadline_s: Annotated[float, Field(gt=0, le=3600)] | None = None
    # The largest answer taken (decoded); the most pages one walk of a listing reads,
    # however it pages (Link, page number, token, restart).
    max_response_bytes: Annotated[int, Field(ge=1 << 16, le=1 << 30)] = 32 << 20
    max_pages: Annotated[int, Field(ge=1, le=100_000)] = 1000
    max_rate_limit_wait_s: Annotated[float, Field(ge=0)] = 900.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 5
    mutation_spacing_s: Annotated[float, Field(ge=0)] = 1.0  # between writes, per tracker advice
    # Of each rate-limit pool of the token (shared by every endpoint using it), what the
    # sync leaves to seats' writes: below 1 a share of the pool's limit, from 1 a count.
    rate_reserve: Annotated[float, Field(ge=0)] = 0.1
    # Requests in flight at once across every endpoint and source using the token (its
    # turns shared like its budget): GitHub allows 100 and asks for one after another.
    max_concurrent_requests: Annotated[int, Field(ge=1, le=100)] = 8
    # Tracker account (login or username) -> seat principal owner.actor. Only these
    # accounts can ever produce a binding; every other assignee is a human.
    seats: dict[str, Principal] = Field(default_factory=dict)
    status_rules: tuple[StatusRule, ...] = ()
    # How often the sync also lists the open issues and reads, one by one, the mirrored
    # unfinished tasks whose issue is not among them (deleted or transferred issues leave
    # the listing without changing anything the poll sees). 0: never.
    reconcile_interval_s: Annotated[float, Field(ge=0)] = 3600.0
    # A webhook delivery naming more issues than this wakes one poll instead of a refresh
    # per issue (a pull request body may mention thousands).
    webhook_max_issues: Annotated[int, Field(ge=0, le=1000)] = 20
    # Issues refreshed one by one for webhooks, at most this many a minute per endpoint
    # (deduplicated while they wait; more waiting than an hour's worth: one poll instead).
    # The regular poll runs on time whatever is waiting.
    webhook_refreshes_per_minute: Annotated[float, Field(gt=0, le=6000)] = 30.0
    # Which issues of the sources are tasks (``hosted.scope``); default: every issue.
    scope: Scope = Field(default_factory=Scope)
    # The source created tasks go to (one of ``sources``); default: the first.
    route: str | None = None

    # The scope keys this tracker reads into its issues (``TrackedIssue``): labels,
    # assignees and the horizon every tracker has; a tracker that fills the milestone or
    # the issue type adds them. A scope naming another key is refused at load.
    SCOPE_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"labels", "exclude_labels", "assignee", "horizon_days"}
    )

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        return http_url(value)

    @property
    def attempt_deadline_s(self) -> float:
        """The one deadline of a tracker attempt, connect to the body's last byte."""
        if self.request_deadline_s is None:
            return self.request_timeout_s
        return min(self.request_timeout_s, self.request_deadline_s)

    @property
    @abstractmethod
    def location(self) -> str:
        """The repository or project the endpoint syncs, as configured: what names its sync
        checkpoint and what its webhook deliveries name (a path, or a GitLab numeric id).
        With several sources: the first."""

    @property
    def sources(self) -> tuple[str, ...]:
        """Every source the endpoint reads, in order (a tracker with several sources
        overrides it); each has its own checkpoint, ``<tracker>:<source>``."""
        return (self.location,)

    def source_lines(self) -> list[str]:
        """What ``check-config`` prints about the sources (nothing for one)."""
        if self.discovery is not None:
            listed = f"those {self.discovery} lists ({self.picking()})"
            return [f"sources: {listed}; created in {self.routed}"]
        if len(self.sources) < 2:
            return []
        return [f"{len(self.sources)} sources: {', '.join(self.sources)}; created in {self.routed}"]

    @property
    def discovery(self) -> str | None:
        """Where the sources are discovered, as messages name it ("organization acme"),
        for a tracker whose sources are listed by the tracker rather than the config
        (``hosted.discovery``); ``None``: ``sources`` are all of them."""
        return None

    def picking(self) -> str:
        """How the discovered sources are picked, as ``check-config`` says it."""
        return ""

    @property
    def routed(self) -> str:
        """The source created tasks go to."""
        return self.route or self.sources[0]

    def outside_natively(self, issue: TrackedIssue) -> str | None:
        """Why ``issue`` is outside the scope keys this tracker has beside ``scope`` (Linear:
        its project, cycle, state types, and the teams), after ``out of scope: ``; ``None``:
        inside, or no such keys."""
        return None

    def native_keys(self) -> list[str]:
        """Those keys as ``check-config`` prints them."""
        return []

    @model_validator(mode="after")
    def _scope_fits(self) -> Self:
        unknown = sorted(self.scope.keys() - self.SCOPE_KEYS)
        if unknown:
            raise ValueError(
                f"the scope's {', '.join(unknown)} is not read from this tracker's issues. "
                f"Use {', '.join(sorted(self.SCOPE_KEYS))}"
            )
        account = self.scope.account
        if account is not None and account not in self.seats:
            raise ValueError(
                f"the scope's assignee {account!r} is no account of the seat directory. "
                'Name an account of `seats`, or "none", or "anyone"'
            )
        listed = self.discovery is None
        if self.route is not None and listed and self.route not in self.sources:
            raise ValueError(
                f"route {self.route!r} is not one of the sources ({', '.join(self.sources)}). "
                "Name one of them, or leave route out to create tasks in the first"
            )
        return self


def one_list_of_sources(data: Any, one: str, many: str, single: str, example: str) -> Any:
    """A tracker's settings name its sources once: ``one`` (a list of one, e.g.
    ``project``) or ``many`` (e.g. ``projects``), never both, never none, none twice.
    ``single`` and ``example`` show a value of each in the remedy."""
    if isinstance(data, dict):
        given, listed = data.get(one), data.get(many)
        if given is None and not listed:
            raise ValueError(f'no {one}. Set {one} = "{single}", or {many} = ["{example}", "…"]')
        if given is not None and listed:
            raise ValueError(
                f"both {one} and {many} are set. Keep one: {many} lists every {one}, "
                f"{one} names a single one"
            )
        if listed and len({str(name).lower() for name in listed}) != len(listed):
            raise ValueError(f"{many} names a {one} twice. Name each once")
    return data
