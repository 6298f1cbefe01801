"""What the shared hosted suites know of a tracker: ``Tracker`` (what the conformance
checks tell a permissioned bridge) and ``Side`` (one tracker under the shared suites:
how to make its fake, open an endpoint on it, read back what an issue holds), whose small
hooks say where the trackers differ in kind. The sides themselves and the fixtures are in
``tests.support.trackers``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cotal_tasks.bridge.config import EndpointConfig
from tests.bridge._support import DictPresence
from tests.providers.hosted_support import HostedEndpoint, HostedMesh
from tests.support.bridge import ENDPOINT
from tests.support.fake_tracker import RecordedRequest


@dataclass(frozen=True)
class Tracker:
    """What the conformance checks tell a permissioned bridge about its tracker."""

    provider: str  # "github", "gitlab", "jira"
    section: Callable[[str], str]  # api url -> the endpoint's TOML lines after its name
    endpoint: Callable[[str], EndpointConfig]  # api url -> the bridge's endpoint config
    labels_of: Callable[[Any, str], list[str]]  # (fake, issue title) -> its claim marks
    claimed: str  # the mark a claim or bind puts on the issue (a label, Jira's status)


class Side(ABC):
    """One tracker under the conformance checks. ``seats`` maps its accounts to the
    callers the checks use; a caller without an account is only labelled on a claim."""

    name: str  # "GitHub", "GitLab"
    provider: str  # "github", "gitlab"
    place: str  # the config key naming the repository or project: "repository", "project"
    prefix: str  # the repository or project path task ids start with
    issues_path: str  # the issues' path on the fake (listed, created, and each under it)
    listing: tuple[str, str]  # the method and path of the issue listing (or search)
    seats: ClassVar[dict[str, str]]
    claimed: str  # the mark a claim or bind puts on an issue (a label, Jira's status)
    closed_source: str = "closed"  # the statusSource of an issue the bridge closed as done
    blocked: str
    open_state: str
    token_env: str
    revoked_token: str
    tracker: Tracker  # the endpoint as check 9's broker half starts it
    # Its listing pages by offset (a GitLab group's): a next page asks again from the
    # last update read, where the others follow a cursor.
    offset_pages: bool = False

    @abstractmethod
    def make_fake(self) -> Any: ...

    def __init__(
        self,
        config: Callable[[str], Any],  # api url -> the endpoint's tracker section
        mesh: Callable[..., AbstractAsyncContextManager[HostedMesh[Any]]],
        opener: Callable[..., AbstractAsyncContextManager[HostedEndpoint[Any]]],
    ) -> None:
        self._mesh, self._open = mesh, opener
        provider = self.provider
        self.tracker = Tracker(
            provider=provider,
            section=self.section,
            endpoint=lambda api_url: EndpointConfig(name=ENDPOINT, settings=config(api_url)),
            labels_of=lambda fake, title: self.marks(self.issue_titled(fake, title)),
            claimed=self.claimed,
        )

    def section(self, api_url: str) -> str:
        """The endpoint's TOML lines after its name."""
        return (
            f'provider = "{self.provider}"\n[endpoints.{self.provider}]\n'
            f'{self.place} = "{self.prefix}"\n'
            f'api_url = "{api_url}"\ntoken_env = "{self.token_env}"\n'
        )

    def mesh(
        self, tmp_path: Path, fake: Any, api_url: str, **overrides: Any
    ) -> AbstractAsyncContextManager[HostedMesh[Any]]:
        return self._mesh(tmp_path, fake, api_url, seats=self.seats, **overrides)

    def open_fresh(
        self, fake: Any, api_url: str, data_dir: Path, presence: DictPresence
    ) -> AbstractAsyncContextManager[HostedEndpoint[Any]]:
        """An endpoint on a fresh mirror, with this side's seat directory."""
        return self._open(fake, api_url, data_dir, presence=presence, seats=self.seats)

    def open(
        self, fake: Any, api_url: str, data_dir: Path, **overrides: Any
    ) -> AbstractAsyncContextManager[HostedEndpoint[Any]]:
        """An endpoint on a fresh mirror, its config as the provider tests default it."""
        return self._open(fake, api_url, data_dir, **overrides)

    @abstractmethod
    def issues(self, fake: Any) -> list[Any]: ...

    @abstractmethod
    def number(self, issue: Any) -> int: ...

    @abstractmethod
    def notes(self, issue: Any) -> list[str]:
        """The comments or notes a user (the bridge) wrote, without their write marks."""

    @abstractmethod
    def body(self, issue: Any) -> str | None: ...

    @abstractmethod
    def claim_writes(self, n: int, actor: str) -> list[tuple[str, str]]:
        """The writes one claim or bind by ``local.<actor>`` makes to issue ``n``."""

    @abstractmethod
    def add_issue(self, fake: Any, title: str, body: str) -> int: ...

    @abstractmethod
    def retitle(self, fake: Any, issue: Any, title: str) -> None: ...

    @abstractmethod
    def updated(self, fake: Any, n: int, back_s: int = 0) -> str:
        """Issue ``n``'s last update, ``back_s`` seconds earlier, as the tracker writes times."""

    @abstractmethod
    def remove(self, fake: Any, n: int) -> None:
        """Issue ``n`` is gone from the tracker's lists (deleted, moved or hidden)."""

    @abstractmethod
    def drop(self, fake: Any, issue: Any) -> str:
        """Close ``issue`` as not done on the tracker; returns the statusSource it maps to."""

    @abstractmethod
    def closed_as_done(self, fake: Any, issue: Any) -> bool:
        """Whether the bridge closed ``issue`` as completed."""

    def refuse_next_listing(self, fake: Any) -> None:
        """The next issue listing is refused (403, not a rate limit)."""
        fake.fail_next(status=403, message="403 Forbidden", path=self.listing[1])

    def listings(self, fake: Any, since: int = 0) -> list[RecordedRequest]:
        """The issue listings (or searches) the fake answered, from request ``since`` on."""
        return [r for r in fake.requests[since:] if r.matches(*self.listing)]

    def issue_path(self, n: int) -> str:
        """The path of issue ``n``'s one-issue read."""
        return f"{self.issues_path}/{n}"

    @property
    def create_path(self) -> str:
        """Where a created issue is posted."""
        return self.issues_path

    def probe_path(self) -> str:
        """What the sync reads to tell an issue gone from a project it cannot read."""
        return self.issues_path

    def assignees(self, issue: Any) -> list[str]:
        return list(issue.assignees)

    def marks(self, issue: Any) -> list[str]:
        """What a claim leaves on ``issue`` besides its assignee (its labels here)."""
        return list(issue.labels)

    def state(self, issue: Any) -> str:
        """The issue's native open or closed state."""
        return str(issue.state)

    def touch(self, fake: Any, n: int) -> None:
        """Issue ``n`` updated, but nothing the record carries changed."""
        fake.touch(self.prefix, n)

    def since(self, fake: Any, n: int, back_s: int = 0) -> str:
        """The "updated since" a listing asks for from issue ``n``'s update less ``back_s``."""
        return self.updated(fake, n, back_s)

    def page_args(self, request: RecordedRequest) -> dict[str, str]:
        """What says which page a listing asks for (its query; Jira's search, its body)."""
        return dict(request.query)

    def accounts(self, actor: str) -> list[str]:
        """The assignees a claim by ``local.<actor>`` leaves on an issue."""
        return [login for login, principal in self.seats.items() if principal == f"local.{actor}"]

    def ref(self, n: int) -> str:
        """The task id of issue ``n``."""
        return f"{self.prefix}#{n}"

    def number_in(self, task_id: str) -> int:
        """The issue number a task id of this tracker names."""
        return int(task_id.rsplit("#", 1)[1])

    def task_id(self, issue: Any) -> str:
        return self.ref(self.number(issue))

    def issue_titled(self, fake: Any, title: str) -> Any:
        (issue,) = [i for i in self.issues(fake) if i.title == title]
        return issue

    def titles(self, fake: Any) -> list[str]:
        return [i.title for i in self.issues(fake)]

    def writes_to(self, fake: Any, issue: Any) -> list[RecordedRequest]:
        """Writes to one issue after its creation."""
        base = self.issue_path(self.number(issue))
        return [r for r in fake.writes if r.path == base or r.path.startswith(base + "/")]

    def shape(self, fake: Any, issue: Any) -> list[tuple[str, str]]:
        return [
            (r.method, r.path.removeprefix(self.issues_path)) for r in self.writes_to(fake, issue)
        ]
