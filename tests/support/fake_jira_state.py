"""The fake Jira Cloud's state: one project's issues (their workflow status, resolution,
labels, assignee, comments, remote links and entity properties), the workflow (statuses,
their categories and the transitions between them, with screen fields), the API user's
time zone, and the JSON the REST API v3 renders them as (the keys of Atlassian's
published examples, ``tests/fixtures/jira``)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from tests.support.clock import FakeClock
from tests.support.fake_tracker import FakeTracker

PROJECT, PROJECT_ID = "DEMO", "10000"
STATUSES = {
    "To Do": ("new", "10000", 2, "blue-gray"),
    "In Progress": ("indeterminate", "3", 4, "yellow"),
    "Blocked": ("indeterminate", "10002", 4, "yellow"),
    "In Review": ("indeterminate", "10003", 4, "yellow"),
    "Done": ("done", "10001", 3, "green"),
}
RESOLUTIONS = ("Done", "Won't Do", "Duplicate", "Cannot Reproduce")


def jira_time(ms: int) -> str:
    """Jira's timestamp: ``2023-06-24T19:24:50.000+0000``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"


def text_document(text: str) -> dict[str, Any]:
    return {
        "type": "doc",
        "version": 1,
        "content": [{"type": "paragraph", "content": [{"type": "text", "text": text}]}],
    }


@dataclass
class Transition:
    id: str
    name: str
    to: str
    sources: tuple[str, ...] | None = None  # None: a global transition, from any status
    screen: dict[str, dict[str, Any]] = field(default_factory=dict)  # field id -> metadata
    # The resolution its post-function sets when the screen gives none (a workflow's
    # "Won't do" into Done, with no screen); None: the resolution the screen gave, if any.
    resolves: str | None = None

    def applies(self, status: str) -> bool:
        return (self.sources is None or status in self.sources) and status != self.to


def resolution_field(required: bool = True) -> dict[str, Any]:
    return {
        "required": required,
        "hasDefaultValue": False,
        "key": "resolution",
        "name": "Resolution",
        "operations": ["set"],
        "schema": {"type": "resolution", "system": "resolution"},
        "allowedValues": [{"id": str(10000 + i), "name": n} for i, n in enumerate(RESOLUTIONS)],
    }


def wont_do_first() -> list[Transition]:
    """A common simplified workflow: from To Do or Blocked, a "Won't do" into Done with no
    screen (its post-function resolves Won't Do) listed before "Done", which has no screen
    either and resolves Done. The first transition into the Done category is Won't do."""
    return [
        Transition("11", "Start progress", "In Progress", ("To Do", "Blocked")),
        Transition("21", "Stop progress", "To Do", ("In Progress", "Blocked", "In Review")),
        Transition("61", "Won't do", "Done", ("To Do", "Blocked"), resolves="Won't Do"),
        Transition("71", "Done", "Done", None, resolves="Done"),
        Transition("41", "Reopen", "To Do", ("Done",)),
        Transition("51", "Block", "Blocked", ("In Progress",)),
    ]


def default_workflow() -> list[Transition]:
    return [
        Transition("11", "Start progress", "In Progress", ("To Do", "Blocked")),
        Transition("21", "Stop progress", "To Do", ("In Progress", "Blocked", "In Review")),
        Transition("31", "Done", "Done", None, {"resolution": resolution_field()}),
        Transition("41", "Reopen", "To Do", ("Done",)),
        Transition("51", "Block", "Blocked", ("In Progress",)),
    ]


@dataclass
class Comment:
    id: str
    body: dict[str, Any]
    author: str
    created_ms: int
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class Issue:
    number: int
    summary: str
    description: dict[str, Any] | None
    created_ms: int
    updated_ms: int
    status: str = "To Do"
    resolution: str | None = None
    labels: list[str] = field(default_factory=list)
    assignee: str | None = None
    security: str | None = None
    comments: list[Comment] = field(default_factory=list)
    remote_links: list[dict[str, Any]] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    key: str = ""  # set by the fake: DEMO-<number>, or the key it moved to
    fix_versions: list[str] = field(default_factory=list)
    issue_type: str = "Task"
    resolved_ms: int | None = None  # ``resolutiondate``: when it last entered Done

    @property
    def title(self) -> str:  # the shared suites read issues by title
        return self.summary


class FakeJiraState(FakeTracker):
    """The state half of ``FakeJira`` (``fake_jira``): issues and their changes."""

    default_retry_after = 1
    api_prefix = ""
    client_url = "http://fake-jira"
    api_url = "http://fake-jira"

    def __init__(self, clock: FakeClock | None = None, *, time_zone: str = "Australia/Sydney"):
        super().__init__(clock or FakeClock())
        self.email, self.token = "bridge@example.com", "ATATT3xFfGF0-fake-jira-api-token"
        self.account = "5b10a2844c20165700ede21g"  # the API user (the bridge)
        self.time_zone = time_zone
        self.issues: dict[int, Issue] = {}
        # The projects the site has (key -> id). Issue numbers run across every project
        # (DEMO-1, OPS-2): a key names one issue all the same.
        self.projects: dict[str, str] = {PROJECT: PROJECT_ID}
        self.moved: dict[str, str] = {}  # old key -> new key
        self.workflow = default_workflow()
        self.assignable: set[str] = {self.account}
        self.next_number = 1
        self.next_id = 10000
        self.page_size_cap = 100
        # Every search page names a next token, and a token past the end answers the last
        # page again: a site (or a proxy) whose search never says ``isLast``.
        self.endless_pages = False
        self.rate_budget: int | None = None  # requests left in the window (None: no limit)
        self.rate_reset_s = 0.0

    # -- what a test does on the site ---------------------------------------------
    def add_project(self, key: str) -> None:
        self.projects.setdefault(key, str(10010 + len(self.projects)))

    def add_issue(self, where: str, title: str, body: str | None = None) -> Issue:
        assert where in self.projects, where
        now = self.clock.ms
        issue = Issue(self.next_number, title, text_document(body) if body else None, now, now)
        issue.key = f"{where}-{issue.number}"
        self.issues[issue.number] = issue
        self.next_number += 1
        return issue

    def bulk_issues(self, where: str, n: int, *, step: int = 60) -> list[int]:
        """``n`` issues created ``step`` s apart, the last at now, each updated half a step
        after creation (its own minute at the default step); every fifth Done (resolution
        Done), every seventh otherwise In Progress with nobody assigned. Their numbers."""
        start = self.clock.ms - (n - 1) * step * 1000
        numbers = []
        for k in range(n):
            issue = self.add_issue(where, f"Bulk issue {k + 1}", f"Seen in build {1000 + k}.")
            issue.created_ms = start + k * step * 1000
            issue.updated_ms = min(issue.created_ms + step * 500, self.clock.ms)
            if (k + 1) % 5 == 0:
                issue.status, issue.resolution = "Done", "Done"
            elif (k + 1) % 7 == 0:
                issue.status = "In Progress"
            numbers.append(issue.number)
        return numbers

    def set_rate_limit(self, remaining: int, *, reset_in: int = 60) -> None:
        """``remaining`` requests until ``now + reset_in`` s; past them, 429s until then."""
        self.rate_budget, self.rate_reset_s = remaining, self.clock.seconds + reset_in

    def advance(self, seconds: int = 1) -> int:
        return self.clock.advance(seconds)

    def touch(self, issue: Issue) -> None:
        issue.updated_ms = self.clock.ms

    def set_status(self, issue: Issue, status: str, resolution: str | None = None) -> None:
        issue.status, issue.resolution = status, resolution
        self.touch(issue)
        issue.resolved_ms = issue.updated_ms if STATUSES[status][0] == "done" else None

    def delete_issue(self, number: int) -> None:
        del self.issues[number]

    def move_issue(self, number: int, new_key: str) -> None:
        issue = self.issues.pop(number)
        self.moved[issue.key] = new_key
        issue.key = new_key
        self.touch(issue)
        self.issues[-number] = issue  # kept, under another project's key

    def issue(self, number: int) -> Issue:
        return self.issues[number]

    def by_key(self, key: str) -> Issue | None:
        key = self.moved.get(key, key)
        return next((i for i in self.issues.values() if i.key == key), None)

    def minute_ms(self, text: str) -> int:
        """A JQL time (``yyyy-MM-dd HH:mm``) in the API user's zone, as epoch ms."""
        at = datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=ZoneInfo(self.time_zone))
        return int(at.timestamp() * 1000)

    def auth_headers(self) -> dict[str, str]:
        pair = base64.b64encode(f"{self.email}:{self.token}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}

    # -- rendering ----------------------------------------------------------------
    def status_json(self, name: str) -> dict[str, Any]:
        category, sid, cid, colour = STATUSES[name]
        base = self.api_url
        return {
            "description": "",
            "iconUrl": f"{base}/images/icons/statuses/generic.png",
            "id": sid,
            "name": name,
            "self": f"{base}/rest/api/3/status/{sid}",
            "statusCategory": {
                "colorName": colour,
                "id": cid,
                "key": category,
                "name": {"new": "To Do", "indeterminate": "In Progress", "done": "Done"}[category],
                "self": f"{base}/rest/api/3/statuscategory/{cid}",
            },
        }

    def user_json(self, account: str) -> dict[str, Any]:
        return {
            "accountId": account,
            "accountType": "atlassian",
            "active": True,
            "displayName": account,
            "self": f"{self.api_url}/rest/api/3/user?accountId={account}",
        }

    def issue_json(
        self, issue: Issue, fields: list[str] | None, properties: Sequence[str] = ()
    ) -> dict[str, Any]:
        every: dict[str, Any] = {
            "summary": issue.summary,
            "description": issue.description,
            "status": self.status_json(issue.status),
            "resolution": None
            if issue.resolution is None
            else {"id": "10000", "name": issue.resolution, "self": f"{self.api_url}/res"},
            "labels": list(issue.labels),
            "assignee": None if issue.assignee is None else self.user_json(issue.assignee),
            "created": jira_time(issue.created_ms),
            "updated": jira_time(issue.updated_ms),
            "security": None
            if issue.security is None
            else {"id": "10021", "name": issue.security, "self": f"{self.api_url}/sl"},
            "project": {
                "id": self.projects.get(issue.key.split("-")[0], "10099"),
                "key": issue.key.split("-")[0],
                "name": "Demo",
                "self": f"{self.api_url}/rest/api/3/project/{PROJECT_ID}",
            },
            "fixVersions": [
                {"id": str(10100 + n), "name": name, "archived": False, "released": False}
                for n, name in enumerate(issue.fix_versions)
            ],
            "issuetype": {"id": "10001", "name": issue.issue_type, "subtask": False},
            "resolutiondate": None if issue.resolved_ms is None else jira_time(issue.resolved_ms),
        }
        chosen = every if fields is None else {k: every[k] for k in fields if k in every}
        rendered: dict[str, Any] = {
            "expand": "",
            "fields": chosen,
            "id": str(10000 + abs(issue.number)),
            "key": issue.key,
            "self": f"{self.api_url}/rest/api/3/issue/{10000 + abs(issue.number)}",
        }
        if properties:
            rendered["properties"] = {
                k: issue.properties[k] for k in properties if k in issue.properties
            }
        return rendered

    def transition_json(self, t: Transition, expand: bool) -> dict[str, Any]:
        found: dict[str, Any] = {
            "hasScreen": bool(t.screen),
            "id": t.id,
            "isAvailable": True,
            "isConditional": False,
            "isGlobal": t.sources is None,
            "isInitial": False,
            "name": t.name,
            "to": self.status_json(t.to),
        }
        if expand:
            found["fields"] = {k: dict(v) for k, v in t.screen.items()}
        return found

    def comment_json(self, comment: Comment, expand: bool) -> dict[str, Any]:
        found: dict[str, Any] = {
            "author": self.user_json(comment.author),
            "body": comment.body,
            "created": jira_time(comment.created_ms),
            "id": comment.id,
            "self": f"{self.api_url}/rest/api/3/comment/{comment.id}",
            "updated": jira_time(comment.created_ms),
        }
        if expand:
            found["properties"] = [{"key": k, "value": v} for k, v in comment.properties.items()]
        return found
