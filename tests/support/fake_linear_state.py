"""The state of the fake Linear (``tests.support.fake_linear``): a workspace with teams
and their workflow states, users and agents (app users), labels, issues with their
assignee, delegate, attachments and comments, and the operations a test performs as a
person would in Linear's app (edit, move a state, delegate, trash, archive, move to
another team). Shapes follow Linear's published schema (``tests/fixtures/linear``)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.support.clock import FakeClock
from tests.support.fake_tracker import FakeTracker, bulk_text

# (name, type, position) of a new team's workflow, as Linear seeds one
WORKFLOW = (
    ("Triage", "triage", 0.0),
    ("Backlog", "backlog", 1.0),
    ("Todo", "unstarted", 2.0),
    ("In Progress", "started", 3.0),
    ("In Review", "started", 4.0),
    ("Blocked", "started", 5.0),
    ("Done", "completed", 6.0),
    ("Canceled", "canceled", 7.0),
    ("Duplicate", "duplicate", 8.0),
)
TEAM = "ENG"


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass
class State:
    id: str
    name: str
    type: str
    position: float


@dataclass
class Team:
    id: str
    key: str
    states: list[State]
    next_number: int = 1
    active_cycle: int | None = None  # the number of the cycle running now


@dataclass
class User:
    id: str
    name: str
    app: bool = False


@dataclass
class Label:
    id: str
    name: str
    team_id: str | None = None  # None: a workspace label


@dataclass
class Comment:
    id: str
    body: str
    created_ms: int
    user_id: str


@dataclass
class Attachment:
    id: str
    url: str
    title: str
    created_ms: int


@dataclass
class Session:
    """An agent session on an issue (Linear opens one when the issue is delegated to an
    agent), with the activities posted to it: (type, body)."""

    id: str
    app_user: str
    activities: list[tuple[str, str]] = field(default_factory=list)
    dismissed_ms: int | None = None


@dataclass
class Issue:
    id: str
    team: Team
    number: int
    title: str
    description: str | None
    state: State
    created_ms: int
    updated_ms: int
    assignee: str | None = None
    delegate: str | None = None
    label_ids: list[str] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    previous: list[str] = field(default_factory=list)
    archived_ms: int | None = None
    trashed: bool = False
    project: str | None = None
    cycle: int | None = None
    cycle_active: bool = False
    sessions: list[Session] = field(default_factory=list)

    labels_of: Any = None  # the workspace's labels by id, for ``label_names``

    @property
    def identifier(self) -> str:
        return f"{self.team.key}-{self.number}"

    @property
    def label_names(self) -> list[str]:
        return [self.labels_of[i].name for i in self.label_ids] if self.labels_of else []


class FakeLinearState(FakeTracker):
    """The workspace. The viewer (the token's user) is ``bridge``."""

    client_url = "http://linear.test"
    api_url = "http://linear.test/graphql"
    api_prefix = "/graphql"

    def __init__(self, clock: FakeClock | None = None, teams: tuple[str, ...] = (TEAM,)) -> None:
        super().__init__(clock or FakeClock())
        self.token = "lin_api_" + "k" * 40
        self.oauth = False  # the token is an OAuth access token (sent as Bearer)
        self.teams: dict[str, Team] = {}
        self.users: dict[str, User] = {}
        self.labels: dict[str, Label] = {}
        self.issues: dict[str, Issue] = {}  # by id
        self.projects: dict[str, str] = {}  # id -> name
        self.deleted: set[str] = set()  # identifiers deleted for good
        self.viewer = self.add_user("bridge")
        self.requests_left, self.complexity_left = 5000, 3_000_000
        self.limits = (5000, 3_000_000)
        self.reset_ms = self.clock.ms + 3_600_000
        self.complexities: list[int] = []  # what each answered query cost
        for key in teams:
            self.add_team(key)
        self.add_label("Blocked")

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}" if self.oauth else self.token}

    # -- the workspace ------------------------------------------------------------------
    def add_team(self, key: str) -> Team:
        states = [State(new_id(), name, kind, pos) for name, kind, pos in WORKFLOW]
        team = Team(new_id(), key, states)
        self.teams[key] = team
        return team

    def add_user(self, name: str, *, app: bool = False, user_id: str | None = None) -> User:
        user = User(user_id or new_id(), name, app)
        self.users[user.id] = user
        return user

    def add_label(self, name: str, team: str | None = None) -> Label:
        label = Label(new_id(), name, None if team is None else self.teams[team].id)
        self.labels[label.id] = label
        return label

    def add_project(self, name: str) -> str:
        project = new_id()
        self.projects[project] = name
        return project

    def state(self, team: str, name: str) -> State:
        (found,) = [s for s in self.teams[team].states if s.name == name]
        return found

    def add_issue(self, where: str, title: str, body: str | None = None) -> Issue:
        """An issue in the team ``where``, as the other fakes make one."""
        return self.new_issue(title, body, team=where)

    def new_issue(
        self, title: str, description: str | None = None, *, team: str = TEAM, state: str = "Todo"
    ) -> Issue:
        owner = self.teams[team]
        now = self.clock.ms
        issue = Issue(
            new_id(),
            owner,
            owner.next_number,
            title,
            description,
            self.state(team, state),
            now,
            now,
        )
        issue.labels_of = self.labels
        owner.next_number += 1
        self.issues[issue.id] = issue
        return issue

    def bulk_issues(self, team: str, count: int, *, spacing_s: float = 0) -> list[Issue]:
        """``count`` issues in ``team``, ``spacing_s`` apart (else a millisecond)."""
        rng = random.Random(count)
        made = []
        for k in range(count):
            title, body = bulk_text(k, rng)
            made.append(self.new_issue(title, body, team=team))
            self.clock.advance_ms(round(spacing_s * 1000) or 1)
        return made

    def issue(self, identifier: str) -> Issue:
        for issue in self.issues.values():
            if issue.identifier == identifier or identifier in issue.previous:
                return issue
        raise KeyError(identifier)

    def advance(self, seconds: int = 1) -> int:
        return self.clock.advance(seconds)

    def touch(self, issue: Issue) -> None:
        issue.updated_ms = self.clock.ms

    # -- what a person does in Linear ----------------------------------------------------
    def edited(self, issue: Issue) -> None:
        """A person's edit, a moment after whatever came before it."""
        self.clock.advance_ms(1)
        self.touch(issue)

    def move(self, issue: Issue, state: str) -> None:
        issue.state = self.state(issue.team.key, state)
        self.edited(issue)

    def set_title(self, issue: Issue, title: str) -> None:
        issue.title = title
        self.edited(issue)

    def assign(self, issue: Issue, user: User | None) -> None:
        issue.assignee = None if user is None else user.id
        self.edited(issue)

    def delegate_to(self, issue: Issue, agent: User | None) -> None:
        self.set_delegate(issue, None if agent is None else agent.id)
        self.edited(issue)

    def set_delegate(self, issue: Issue, account: str | None) -> None:
        """Delegate (or not): an agent delegated an issue gets a session on it, as in
        Linear."""
        issue.delegate = account
        app = account is not None and self.users[account].app
        if app and not any(s.app_user == account for s in issue.sessions):
            issue.sessions.append(Session(new_id(), str(account)))

    def label(self, issue: Issue, name: str) -> None:
        (label,) = [x for x in self.labels.values() if x.name == name]
        issue.label_ids.append(label.id)
        self.edited(issue)

    def set_project(self, issue: Issue, name: str | None) -> None:
        issue.project = name
        self.edited(issue)

    def unlabel(self, issue: Issue, name: str) -> None:
        issue.label_ids = [x for x in issue.label_ids if self.labels[x].name != name]
        self.edited(issue)

    def attach(self, issue: Issue, url: str, title: str = "linked") -> None:
        issue.attachments.append(Attachment(new_id(), url, title, self.clock.ms))
        self.edited(issue)

    def trash(self, issue: Issue) -> None:
        issue.trashed, issue.archived_ms = True, self.clock.ms
        self.edited(issue)

    def archive(self, issue: Issue) -> None:
        issue.archived_ms = self.clock.ms
        self.edited(issue)

    def to_team(self, issue: Issue, key: str) -> None:
        """A team move: a new identifier, the old one kept in ``previousIdentifiers``."""
        issue.previous.append(issue.identifier)
        team = self.teams[key]
        issue.team, issue.number = team, team.next_number
        team.next_number += 1
        issue.state = next(s for s in team.states if s.type == issue.state.type)
        self.edited(issue)

    def delete(self, issue: Issue) -> None:
        del self.issues[issue.id]
        self.deleted.add(issue.identifier)

    def set_rate_limit(
        self, requests: int, *, complexity: int = 3_000_000, reset_in: int = 60
    ) -> None:
        """``requests`` (and ``complexity`` points) until ``now + reset_in`` s; past them,
        ``RATELIMITED`` until then."""
        self.requests_left, self.complexity_left = requests, complexity
        self.reset_ms = self.clock.ms + reset_in * 1000

    # -- rendering, as the schema's types ----------------------------------------------
    def render(self, issue: Issue) -> dict[str, Any]:
        team = issue.team
        users = self.users
        return {
            "id": issue.id,
            "identifier": issue.identifier,
            "number": float(issue.number),
            "title": issue.title,
            "description": issue.description,
            "createdAt": iso(issue.created_ms),
            "updatedAt": iso(issue.updated_ms),
            "archivedAt": None if issue.archived_ms is None else iso(issue.archived_ms),
            "trashed": issue.trashed or None,
            "previousIdentifiers": list(issue.previous),
            "state": vars(issue.state) | {"team": None},
            "team": {
                "id": team.id,
                "key": team.key,
                "states": {"nodes": [vars(s) for s in team.states]},
            },
            "assignee": None if issue.assignee is None else vars(users[issue.assignee]),
            "delegate": None if issue.delegate is None else vars(users[issue.delegate]),
            "labels": {"nodes": [{"id": i, "name": self.labels[i].name} for i in issue.label_ids]},
            "attachments": {
                "nodes": [
                    {"url": a.url, "createdAt": iso(a.created_ms), "updatedAt": iso(a.created_ms)}
                    for a in issue.attachments
                ]
            },
            "comments": {"nodes": [{"body": c.body} for c in issue.comments]},
            "project": None if issue.project is None else self.render_project(issue.project),
            "cycle": None
            if issue.cycle is None
            else {"number": float(issue.cycle), "isActive": issue.cycle_active},
            "completedAt": iso(issue.updated_ms) if issue.state.type == "completed" else None,
            "canceledAt": iso(issue.updated_ms) if issue.state.type == "canceled" else None,
            "agentSessions": {"nodes": [self.render_session(x) for x in issue.sessions]},
        }

    def render_project(self, name: str) -> dict[str, Any]:
        (found,) = [pid for pid, n in self.projects.items() if n == name]
        return {"id": found, "name": name}

    def render_session(self, session: Session) -> dict[str, Any]:
        kinds = {
            "thought": "AgentActivityThoughtContent",
            "response": "AgentActivityResponseContent",
        }
        return {
            "id": session.id,
            "appUser": vars(self.users[session.app_user]),
            "endedAt": None,
            "dismissedAt": None if session.dismissed_ms is None else iso(session.dismissed_ms),
            "activities": {
                "nodes": [
                    {"content": {"__typename": kinds[kind], "type": kind, "body": body}}
                    for kind, body in session.activities
                ]
            },
        }


def iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
