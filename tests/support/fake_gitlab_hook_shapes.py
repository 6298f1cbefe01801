"""The parts every GitLab hook payload is built of, from a ``FakeGitLab``: the user, the
project, an issue's and a merge request's attributes, labels and the ``changes`` of an
update, with times in the live (``2026-11-30 06:43:14 UTC``) or the ISO style."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from tests.support.fake_gitlab_model import (
    JSON,
    Issue,
    Project,
    hook_time,
    iso,
)

if TYPE_CHECKING:
    from tests.support.fake_gitlab_state import FakeGitLab

TimeFormat = Literal["utc", "iso"]

STATE_ID = {"opened": 1, "closed": 2, "merged": 3, "locked": 4}


class HookShapes:
    """Renders records in webhook shapes (users with redacted email, label objects)."""

    def __init__(self, fake: FakeGitLab, time_format: TimeFormat) -> None:
        self.fake = fake
        self.shapes = fake.shapes()
        self.time_format = time_format

    def t(self, ms: int | None) -> str | None:
        if ms is None:
            return None
        return hook_time(ms) if self.time_format == "utc" else iso(ms)

    def user(self, username: str) -> JSON:
        u = self.fake.users[username]
        return {
            "id": u.id,
            "name": u.name,
            "username": u.username,
            "avatar_url": self.shapes.avatar(u.username),
            "email": "[REDACTED]",
        }

    def project(self, project: Project) -> JSON:
        web = self.shapes.project_web(project)
        host = self.fake.web_url.split("://", 1)[-1].rstrip("/")
        ssh = f"git@{host}:{project.path_with_namespace}.git"
        return {
            "id": project.id,
            "name": project.name,
            "description": None,
            "web_url": web,
            "avatar_url": None,
            "git_ssh_url": ssh,
            "git_http_url": f"{web}.git",
            "namespace": project.namespace.rsplit("/", 1)[-1].title(),
            "visibility_level": 0,
            "path_with_namespace": project.path_with_namespace,
            "default_branch": project.default_branch,
            "ci_config_path": None,
            "homepage": web,
            "url": ssh,
            "ssh_url": ssh,
            "http_url": f"{web}.git",
        }

    def repository(self, project: Project) -> JSON:
        web = self.shapes.project_web(project)
        return {"name": project.name, "url": f"{web}.git", "description": None, "homepage": web}

    def labels(self, project: Project, names: Sequence[str]) -> list[JSON]:
        return [
            self.shapes.hook_label(project, self.fake.ensure_label(project, name)) for name in names
        ]

    def issue_attrs(self, issue: Issue) -> JSON:
        project = self.fake.projects[issue.project_id]
        return {
            "author_id": self.fake.users[issue.author].id,
            "closed_at": self.t(issue.closed_ms),
            "confidential": issue.confidential,
            "created_at": self.t(issue.created_ms),
            "description": issue.description,
            "discussion_locked": None,
            "due_date": None,
            "id": issue.id,
            "iid": issue.iid,
            "last_edited_at": None,
            "last_edited_by_id": None,
            "milestone_id": None,
            "moved_to_id": None,
            "duplicated_to_id": None,
            "project_id": project.id,
            "relative_position": None,
            "state_id": STATE_ID[issue.state],
            "time_estimate": 0,
            "title": issue.title,
            "updated_at": self.t(issue.updated_ms),
            "updated_by_id": None,
            "type": "Issue",
            "url": self.shapes.issue_web(project, issue.iid),
            "total_time_spent": 0,
            "time_change": 0,
            "human_total_time_spent": None,
            "human_time_change": None,
            "human_time_estimate": None,
            "assignee_ids": [self.fake.users[a].id for a in issue.assignees],
            "assignee_id": self.fake.users[issue.assignees[0]].id if issue.assignees else None,
            "labels": self.labels(project, issue.labels),
            "state": issue.state,
            "severity": "unknown",
            "customer_relations_contacts": [],
        }

    def envelope(self, project: Project, kind: str, event_type: str, username: str) -> JSON:
        return {
            "object_kind": kind,
            "event_type": event_type,
            "user": self.user(username),
            "project": self.project(project),
        }
