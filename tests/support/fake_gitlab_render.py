"""JSON shapes of the fake GitLab, after the documented REST entities (``UserBasic``,
``ProjectIssue``, ``MergeRequestBasic``/``MergeRequest``, ``Note``, ``PipelineBasic``)
and the webhook objects. API links are absolute under the API base given (the server's
own, when serving); ``web_url`` values are under the instance's web URL."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from tests.support.fake_gitlab_model import (
    JSON,
    Issue,
    Label,
    MergeRequest,
    Note,
    Pipeline,
    Project,
    User,
    iso,
)


def _maybe_iso(ms: int | None) -> str | None:
    return None if ms is None else iso(ms)


def _time_stats() -> JSON:
    return {
        "time_estimate": 0,
        "total_time_spent": 0,
        "human_time_estimate": None,
        "human_total_time_spent": None,
    }


class Shapes:
    """Renders records as GitLab JSON under one API base URL (``…/api/v4``)."""

    def __init__(
        self,
        users: Mapping[str, User],
        projects: Mapping[int, Project],
        api: str,
        web: str,
    ) -> None:
        self.users = users
        self.projects = projects
        self.api = api.rstrip("/")
        self.web = web.rstrip("/")

    # -- users, projects, labels -----------------------------------------------------

    def avatar(self, username: str) -> str:
        digest = hashlib.md5(username.encode(), usedforsecurity=False).hexdigest()
        return f"https://secure.gravatar.com/avatar/{digest}?s=80&d=identicon"

    def user(self, username: str) -> JSON:
        """``UserBasic``: what issues and merge requests embed."""
        u = self.users[username]
        return {
            "id": u.id,
            "username": u.username,
            "name": u.name,
            "state": u.state,
            "locked": False,
            "avatar_url": self.avatar(u.username),
            "web_url": f"{self.web}/{u.username}",
        }

    def user_full(self, username: str) -> JSON:
        """``GET /user`` and ``GET /users`` rows (public fields)."""
        u = self.users[username]
        return self.user(username) | {
            "bot": u.bot,
            "public_email": None,
            "bio": "",
            "location": "",
            "organization": "",
            "job_title": "",
            "created_at": "2024-01-15T09:30:00.000Z",
        }

    def maybe_user(self, username: str | None) -> JSON | None:
        return None if username is None else self.user(username)

    def project(self, project: Project) -> JSON:
        p = f"{self.api}/projects/{project.id}"
        namespace = project.namespace
        return {
            "id": project.id,
            "description": None,
            "name": project.name,
            "name_with_namespace": " / ".join(project.path_with_namespace.split("/")),
            "path": project.path,
            "path_with_namespace": project.path_with_namespace,
            "created_at": iso(project.created_ms),
            "default_branch": project.default_branch,
            "tag_list": [],
            "topics": [],
            "ssh_url_to_repo": f"git@{self._host}:{project.path_with_namespace}.git",
            "http_url_to_repo": f"{self.web}/{project.path_with_namespace}.git",
            "web_url": self.project_web(project),
            "readme_url": None,
            "forks_count": 0,
            "avatar_url": None,
            "star_count": 0,
            "last_activity_at": iso(project.created_ms),
            "namespace": {
                "id": 100 + project.id,
                "name": namespace.rsplit("/", 1)[-1],
                "path": namespace.rsplit("/", 1)[-1],
                "kind": "group",
                "full_path": namespace,
                "parent_id": None,
                "avatar_url": None,
                "web_url": f"{self.web}/groups/{namespace}",
            },
            "_links": {
                "self": p,
                "issues": f"{p}/issues",
                "merge_requests": f"{p}/merge_requests",
                "repo_branches": f"{p}/repository/branches",
                "labels": f"{p}/labels",
                "events": f"{p}/events",
                "members": f"{p}/members",
            },
            "visibility": "private",
            "issues_enabled": True,
            "merge_requests_enabled": True,
            "archived": project.archived,
            "open_issues_count": sum(1 for i in project.issues.values() if i.state == "opened"),
        }

    def group(self, path: str, group_id: int) -> JSON:
        """``GET /groups/:id``: a group (the fields a client reads)."""
        parent = path.rsplit("/", 1)[0] if "/" in path else None
        return {
            "id": group_id,
            "name": path.rsplit("/", 1)[-1].title(),
            "path": path.rsplit("/", 1)[-1],
            "full_name": " / ".join(part.title() for part in path.split("/")),
            "full_path": path,
            "parent_id": None if parent is None else 0,
            "visibility": "private",
            "web_url": f"{self.web}/groups/{path}",
        }

    def project_web(self, project: Project) -> str:
        return f"{self.web}/{project.path_with_namespace}"

    @property
    def _host(self) -> str:
        return self.web.split("://", 1)[-1].split("/", 1)[0]

    def label_detail(self, label: Label) -> JSON:
        """A label with ``with_labels_details=true``."""
        return {
            "id": label.id,
            "name": label.name,
            "color": label.color,
            "description": label.description,
            "description_html": label.description or "",
            "text_color": "#FFFFFF",
        }

    def hook_label(self, project: Project, label: Label) -> JSON:
        """A label as webhooks carry it (``labels``, ``changes.labels``)."""
        return {
            "id": label.id,
            "title": label.name,
            "color": label.color,
            "project_id": project.id,
            "created_at": iso(label.created_ms),
            "updated_at": iso(label.created_ms),
            "template": False,
            "description": label.description,
            "type": "ProjectLabel",
            "group_id": None,
        }

    # -- issues ----------------------------------------------------------------------

    def milestone(self, project: Project, milestone: int | None) -> JSON | None:
        """A project milestone as GitLab shows it on an issue and in its listing."""
        if milestone is None or milestone not in project.milestones:
            return None
        at = iso(project.created_ms)
        return {
            "id": milestone,
            "iid": sorted(project.milestones).index(milestone) + 1,
            "project_id": project.id,
            "title": project.milestones[milestone],
            "description": "",
            "state": "active",
            "created_at": at,
            "updated_at": at,
            "due_date": None,
            "start_date": None,
            "expired": False,
            "web_url": f"{self.project_web(project)}/-/milestones/{milestone}",
        }

    def issue_web(self, project: Project, iid: int) -> str:
        return f"{self.project_web(project)}/-/issues/{iid}"

    def issue(
        self,
        issue: Issue,
        *,
        single: bool = False,
        labels_details: bool = False,
        mr_count: int = 0,
    ) -> JSON:
        """``ProjectIssue``; ``single`` adds ``subscribed`` (the single-issue endpoint)."""
        project = self.projects[issue.project_id]
        i = f"{self.api}/projects/{project.id}/issues/{issue.iid}"
        labels: list[object] = list(issue.labels)
        if labels_details:
            labels = [self.label_detail(project.labels[n]) for n in issue.labels]
        out: JSON = {
            "id": issue.id,
            "iid": issue.iid,
            "project_id": project.id,
            "title": issue.title,
            "description": issue.description,
            "state": issue.state,
            "created_at": iso(issue.created_ms),
            "updated_at": iso(issue.updated_ms),
            "closed_at": _maybe_iso(issue.closed_ms),
            "closed_by": self.maybe_user(issue.closed_by),
            "labels": labels,
            "milestone": self.milestone(project, issue.milestone_id),
            "assignees": [self.user(a) for a in issue.assignees],
            "author": self.user(issue.author),
            "type": issue.issue_type.upper(),
            "assignee": self.user(issue.assignees[0]) if issue.assignees else None,
            "user_notes_count": issue.user_notes_count,
            "merge_requests_count": mr_count,
            "upvotes": 0,
            "downvotes": 0,
            "due_date": None,
            "confidential": issue.confidential,
            "discussion_locked": None,
            "issue_type": issue.issue_type,
            "web_url": self.issue_web(project, issue.iid),
            "time_stats": _time_stats(),
            "task_completion_status": {"count": 0, "completed_count": 0},
            "blocking_issues_count": 0,
            "has_tasks": False,
            "_links": {
                "self": i,
                "notes": f"{i}/notes",
                "award_emoji": f"{i}/award_emoji",
                "project": f"{self.api}/projects/{project.id}",
                "closed_as_duplicate_of": issue.duplicate_of,
            },
            "references": {
                "short": f"#{issue.iid}",
                "relative": f"#{issue.iid}",
                "full": f"{project.path_with_namespace}#{issue.iid}",
            },
            "severity": "UNKNOWN",
            "moved_to_id": issue.moved_to_id,
            "imported": False,
            "imported_from": "none",
            "service_desk_reply_to": None,
        }
        if single:
            out["subscribed"] = True
        return out

    def note(self, issue: Issue, note: Note) -> JSON:
        return {
            "id": note.id,
            "type": None,
            "body": note.body,
            "author": self.user(note.author),
            "created_at": iso(note.created_ms),
            "updated_at": iso(note.updated_ms),
            "system": note.system,
            "noteable_id": issue.id,
            "noteable_type": "Issue",
            "project_id": issue.project_id,
            "resolvable": False,
            "confidential": False,
            "internal": False,
            "imported": False,
            "imported_from": "none",
            "noteable_iid": issue.iid,
            "commands_changes": {},
        }

    # -- merge requests and pipelines --------------------------------------------------

    def pipeline(self, project: Project, pipeline: Pipeline, *, full: bool = False) -> JSON:
        out: JSON = {
            "id": pipeline.id,
            "iid": pipeline.iid,
            "project_id": project.id,
            "sha": pipeline.sha,
            "ref": pipeline.ref,
            "status": pipeline.status,
            "source": "push",
            "created_at": iso(pipeline.created_ms),
            "updated_at": iso(pipeline.updated_ms),
            "web_url": f"{self.project_web(project)}/-/pipelines/{pipeline.id}",
        }
        if full:
            finished = pipeline.status in ("success", "failed", "canceled", "skipped")
            out |= {
                "before_sha": "0" * 40,
                "tag": False,
                "yaml_errors": None,
                "started_at": iso(pipeline.created_ms),
                "finished_at": iso(pipeline.updated_ms) if finished else None,
                "committed_at": None,
                "duration": (pipeline.updated_ms - pipeline.created_ms) // 1000
                if finished
                else None,
                "queued_duration": 1,
                "coverage": None,
                "detailed_status": {
                    "icon": f"status_{pipeline.status}",
                    "text": pipeline.status.replace("_", " "),
                    "label": "passed" if pipeline.status == "success" else pipeline.status,
                    "group": pipeline.status,
                    "tooltip": "passed" if pipeline.status == "success" else pipeline.status,
                    "has_details": True,
                    "details_path": f"/{project.path_with_namespace}/-/pipelines/{pipeline.id}",
                    "illustration": None,
                    "favicon": f"/assets/ci_favicons/favicon_status_{pipeline.status}.png",
                },
            }
        return out

    def mr_web(self, project: Project, iid: int) -> str:
        return f"{self.project_web(project)}/-/merge_requests/{iid}"

    def merge_request(self, mr: MergeRequest, *, full: bool = False) -> JSON:
        """``MergeRequestBasic`` (lists, ``closed_by``, ``related_merge_requests``);
        ``full`` is the single-MR entity with ``head_pipeline``."""
        project = self.projects[mr.project_id]
        out: JSON = {
            "id": mr.id,
            "iid": mr.iid,
            "project_id": project.id,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "created_at": iso(mr.created_ms),
            "updated_at": iso(mr.updated_ms),
            "merged_by": self.maybe_user(mr.merged_by),
            "merge_user": self.maybe_user(mr.merged_by),
            "merged_at": _maybe_iso(mr.merged_ms),
            "closed_by": self.maybe_user(mr.closed_by),
            "closed_at": _maybe_iso(mr.closed_ms),
            "target_branch": mr.target_branch,
            "source_branch": mr.source_branch,
            "user_notes_count": 0,
            "upvotes": 0,
            "downvotes": 0,
            "author": self.user(mr.author),
            "assignees": [self.user(a) for a in mr.assignees],
            "assignee": self.user(mr.assignees[0]) if mr.assignees else None,
            "reviewers": [],
            "source_project_id": mr.source_project_id or project.id,
            "target_project_id": project.id,
            "labels": list(mr.labels),
            "draft": mr.draft,
            "work_in_progress": mr.draft,
            "milestone": None,
            "merge_when_pipeline_succeeds": False,
            "merge_status": "can_be_merged",
            "detailed_merge_status": "mergeable" if mr.state == "opened" else "not_open",
            "sha": mr.sha,
            "merge_commit_sha": mr.merge_commit_sha,
            "squash_commit_sha": None,
            "discussion_locked": None,
            "should_remove_source_branch": None,
            "force_remove_source_branch": True,
            "prepared_at": iso(mr.created_ms),
            "reference": f"!{mr.iid}",
            "references": {
                "short": f"!{mr.iid}",
                "relative": f"!{mr.iid}",
                "full": f"{project.path_with_namespace}!{mr.iid}",
            },
            "web_url": self.mr_web(project, mr.iid),
            "time_stats": _time_stats(),
            "squash": False,
            "squash_on_merge": False,
            "task_completion_status": {"count": 0, "completed_count": 0},
            "has_conflicts": False,
            "blocking_discussions_resolved": True,
        }
        if full:
            pipe = mr.head_pipeline
            out |= {
                "subscribed": True,
                "changes_count": "1",
                "latest_build_started_at": _maybe_iso(pipe.created_ms if pipe else None),
                "latest_build_finished_at": _maybe_iso(pipe.updated_ms if pipe else None),
                "first_deployed_to_production_at": None,
                "pipeline": self.pipeline(project, pipe) if pipe else None,
                "head_pipeline": self.pipeline(project, pipe, full=True) if pipe else None,
                "diff_refs": {
                    "base_sha": "0" * 40,
                    "head_sha": mr.sha,
                    "start_sha": "0" * 40,
                },
                "merge_error": None,
                "first_contribution": False,
                "user": {"can_merge": True},
            }
        return out
