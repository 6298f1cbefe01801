"""JSON shapes of the fake GitHub, after the documented REST objects (``simple-user``,
``issue``, ``pull-request``, ``issue-comment``, timeline events) and the octokit webhook
examples. URLs are absolute under the API base given (the server's own, when serving)."""

from __future__ import annotations

from collections.abc import Mapping

from tests.support.fake_github_model import (
    JSON,
    Comment,
    Event,
    Issue,
    Repo,
    iso,
    node_id,
    user_id,
)
from tests.support.fake_tracker import fake_sha

_EVENT_PREFIX = {
    "labeled": "LE",
    "unlabeled": "UNLE",
    "assigned": "AE",
    "unassigned": "UAE",
    "closed": "CE",
    "reopened": "REE",
    "referenced": "REFE",
    "connected": "CNE",
    "disconnected": "DCNE",
    "renamed": "RTE",
    "merged": "ME",
}


def _reactions(url: str) -> JSON:
    counts = dict.fromkeys(("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket"), 0)
    return {"url": url, "total_count": 0, **counts, "eyes": 0}


class Shapes:
    """Renders records as GitHub JSON under one API base URL."""

    def __init__(
        self, repos: Mapping[str, Repo], api: str, html: str = "https://github.com"
    ) -> None:
        self.repos = repos
        self.api = api.rstrip("/")
        self.html = html.rstrip("/")

    # -- users and repositories ------------------------------------------------------

    def user(self, login: str) -> JSON:
        u = f"{self.api}/users/{login}"
        return {
            "login": login,
            "id": user_id(login),
            "node_id": node_id("U", user_id(login)).replace("_kwDO", "_kgDO"),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id(login)}?v=4",
            "gravatar_id": "",
            "url": u,
            "html_url": f"{self.html}/{login}",
            "followers_url": f"{u}/followers",
            "following_url": f"{u}/following{{/other_user}}",
            "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs",
            "repos_url": f"{u}/repos",
            "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "user_view_type": "public",
            "site_admin": False,
        }

    def repository(self, repo: Repo) -> JSON:
        r = f"{self.api}/repos/{repo.full_name}"
        open_count = sum(1 for i in repo.issues.values() if i.visible and i.state == "open")
        return {
            "id": repo.id,
            "node_id": node_id("R", repo.id).replace("_kwDO", "_kgDO"),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": False,
            "owner": self.user(repo.owner),
            "html_url": f"{self.html}/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": r,
            "issues_url": f"{r}/issues{{/number}}",
            "pulls_url": f"{r}/pulls{{/number}}",
            "labels_url": f"{r}/labels{{/name}}",
            "assignees_url": f"{r}/assignees{{/user}}",
            "issue_events_url": f"{r}/issues/events{{/number}}",
            "issue_comment_url": f"{r}/issues/comments{{/number}}",
            "commits_url": f"{r}/commits{{/sha}}",
            "hooks_url": f"{r}/hooks",
            "created_at": iso(repo.created_at),
            "updated_at": iso(repo.created_at),
            "pushed_at": iso(repo.created_at),
            "clone_url": f"{self.html}/{repo.full_name}.git",
            "has_issues": True,
            "archived": repo.archived,
            "disabled": False,
            "visibility": "public",
            "open_issues_count": open_count,
            "open_issues": open_count,
            "default_branch": repo.default_branch,
        }

    def label(self, repo: Repo, name: str) -> JSON:
        label = repo.labels[name]
        return {
            "id": label.id,
            "node_id": node_id("LA", label.id),
            "url": f"{self.api}/repos/{repo.full_name}/labels/{name.replace(' ', '%20')}",
            "name": label.name,
            "color": label.color,
            "default": label.default,
            "description": label.description,
        }

    def milestone(self, repo: Repo, number: int | None) -> JSON | None:
        """A milestone as GitHub shows it on an issue and in the milestone listing."""
        if number is None or number not in repo.milestones:
            return None
        m = f"{self.api}/repos/{repo.full_name}/milestones/{number}"
        count = [i for i in repo.issues.values() if i.visible and i.milestone == number]
        return {
            "url": m,
            "html_url": f"{self.html}/{repo.full_name}/milestone/{number}",
            "labels_url": f"{m}/labels",
            "id": repo.id * 1000 + number,
            "node_id": node_id("MI", repo.id, number),
            "number": number,
            "title": repo.milestones[number],
            "description": None,
            "creator": self.user(repo.owner),
            "open_issues": sum(1 for i in count if i.state == "open"),
            "closed_issues": sum(1 for i in count if i.state == "closed"),
            "state": "open",
            "created_at": iso(repo.created_at),
            "updated_at": iso(repo.created_at),
            "due_on": None,
            "closed_at": None,
        }

    def issue_type(self, name: str | None) -> JSON | None:
        """An issue type as GitHub shows it on an issue (an organisation's types)."""
        if name is None:
            return None
        return {
            "id": 400 + sum(name.encode()),
            "node_id": node_id("IT", sum(name.encode())),
            "name": name,
            "description": None,
            "color": "gray",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "is_enabled": True,
        }

    # -- issues and pull requests ----------------------------------------------------

    def issue(self, issue: Issue, *, single: bool = False, with_repo: bool = False) -> JSON:
        """The ``issue`` object (a PR appears with a ``pull_request`` key). ``single``
        adds what only the single-issue endpoint returns (``closed_by``)."""
        repo = self.repos[issue.repo]
        i = f"{self.api}/repos/{repo.full_name}/issues/{issue.number}"
        kind = "pull" if issue.pull else "issues"
        out: JSON = {
            "url": i,
            "repository_url": f"{self.api}/repos/{repo.full_name}",
            "labels_url": f"{i}/labels{{/name}}",
            "comments_url": f"{i}/comments",
            "events_url": f"{i}/events",
            "html_url": f"{self.html}/{repo.full_name}/{kind}/{issue.number}",
            "id": issue.id,
            # a PR's node id here is the pull request's (its ``id`` is the issue id)
            "node_id": node_id("PR", issue.pull.id) if issue.pull else node_id("I", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self.user(issue.user),
            "labels": [self.label(repo, name) for name in issue.labels],
            "state": issue.state,
            "locked": issue.locked,
            "assignee": self.user(issue.assignees[0]) if issue.assignees else None,
            "assignees": [self.user(a) for a in issue.assignees],
            "milestone": self.milestone(repo, issue.milestone),
            "comments": len(issue.comments),
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": iso(issue.closed_at) if issue.closed_at is not None else None,
            "author_association": self._association(repo, issue.user),
            "type": self.issue_type(issue.issue_type),
            "active_lock_reason": None,
            "sub_issues_summary": {"total": 0, "completed": 0, "percent_completed": 0},
            "issue_dependencies_summary": {
                "blocked_by": issue.blocked_by,
                "total_blocked_by": issue.blocked_by,
                "blocking": 0,
                "total_blocking": 0,
            },
            "body": issue.body,
            "reactions": _reactions(f"{i}/reactions"),
            "timeline_url": f"{i}/timeline",
            "performed_via_github_app": None,
            "state_reason": issue.state_reason,
        }
        if issue.pull is not None:
            p = f"{self.html}/{repo.full_name}/pull/{issue.number}"
            out["draft"] = issue.pull.draft
            out["pull_request"] = {
                "url": f"{self.api}/repos/{repo.full_name}/pulls/{issue.number}",
                "html_url": p,
                "diff_url": f"{p}.diff",
                "patch_url": f"{p}.patch",
                "merged_at": _maybe_iso(issue.pull.merged_at),
            }
        if single:
            out["closed_by"] = self.user(issue.closed_by) if issue.closed_by else None
        if with_repo:
            out["repository"] = self.repository(repo)
        return out

    def pull(self, issue: Issue, *, full: bool = True) -> JSON:
        """The ``pull-request`` object (``/pulls/{n}``, webhooks); ``full=False`` is the
        ``pull-request-simple`` of the list endpoint."""
        assert issue.pull is not None, f"#{issue.number} is not a pull request"
        pr = issue.pull
        repo = self.repos[issue.repo]
        r = f"{self.api}/repos/{repo.full_name}"
        p = f"{self.html}/{repo.full_name}/pull/{issue.number}"
        repo_json = self.repository(repo)
        out: JSON = {
            "url": f"{r}/pulls/{issue.number}",
            "id": pr.id,
            "node_id": node_id("PR", pr.id),
            "html_url": p,
            "diff_url": f"{p}.diff",
            "patch_url": f"{p}.patch",
            "issue_url": f"{r}/issues/{issue.number}",
            "commits_url": f"{r}/pulls/{issue.number}/commits",
            "review_comments_url": f"{r}/pulls/{issue.number}/comments",
            "review_comment_url": f"{r}/pulls/comments{{/number}}",
            "comments_url": f"{r}/issues/{issue.number}/comments",
            "statuses_url": f"{r}/statuses/{pr.head_sha}",
            "number": issue.number,
            "state": issue.state,
            "locked": issue.locked,
            "title": issue.title,
            "user": self.user(issue.user),
            "body": issue.body,
            "labels": [self.label(repo, name) for name in issue.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": _maybe_iso(issue.closed_at),
            "merged_at": _maybe_iso(pr.merged_at),
            "merge_commit_sha": pr.merge_commit_sha,
            "assignee": self.user(issue.assignees[0]) if issue.assignees else None,
            "assignees": [self.user(a) for a in issue.assignees],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._head(repo, pr.head_ref, pr.head_sha, pr.head_repo),
            "base": {
                "label": f"{repo.owner}:{pr.base_ref}",
                "ref": pr.base_ref,
                "sha": fake_sha(repo.full_name, pr.base_ref),
                "user": self.user(repo.owner),
                "repo": repo_json,
            },
            "author_association": self._association(repo, issue.user),
            "auto_merge": None,
            "draft": pr.draft,
        }
        if full:
            out |= {
                "merged": pr.merged_at is not None,
                "mergeable": None if pr.merged_at else True,
                "merged_by": self.user(pr.merged_by) if pr.merged_by else None,
                "comments": len(issue.comments),
                "review_comments": 0,
                "commits": 1,
                "additions": 10,
                "deletions": 2,
                "changed_files": 1,
            }
        return out

    def _head(self, repo: Repo, ref: str, sha: str, fork: str | None) -> JSON:
        """A pull request's head: a branch of the repository itself or of a fork."""
        owner = fork.split("/", 1)[0] if fork else repo.owner
        fork_repo = self.repos.get(fork) if fork else repo
        return {
            "label": f"{owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(owner),
            "repo": self.repository(fork_repo) if fork_repo is not None else None,
        }

    def comment(self, issue: Issue, comment: Comment) -> JSON:
        repo = self.repos[issue.repo]
        r = f"{self.api}/repos/{repo.full_name}"
        c = f"{r}/issues/comments/{comment.id}"
        kind = "pull" if issue.pull else "issues"
        return {
            "url": c,
            "html_url": f"{self.html}/{repo.full_name}/{kind}/{issue.number}"
            f"#issuecomment-{comment.id}",
            "issue_url": f"{r}/issues/{issue.number}",
            "id": comment.id,
            "node_id": node_id("IC", comment.id),
            "user": self.user(comment.user),
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "author_association": self._association(repo, comment.user),
            "body": comment.body,
            "reactions": _reactions(f"{c}/reactions"),
            "performed_via_github_app": None,
        }

    def event(self, issue: Issue, event: Event) -> JSON:
        """One timeline item, in the shape GitHub gives that event type."""
        if event.kind == "commented" and event.comment is not None:
            return self.comment(issue, event.comment) | {
                "event": "commented",
                "actor": self.user(event.actor),
            }
        if event.kind == "cross-referenced" and event.source is not None:
            src_repo, src_number = event.source
            source = self.repos[src_repo].issues[src_number]
            return {
                "actor": self.user(event.actor),
                "created_at": iso(event.created_at),
                "updated_at": iso(event.created_at),
                "source": {"type": "issue", "issue": self.issue(source, with_repo=True)},
                "event": "cross-referenced",
            }
        repo = self.repos[issue.repo]
        commit_url = None
        if event.commit_id is not None:
            commit_repo = event.commit_repo or repo.full_name
            commit_url = f"{self.api}/repos/{commit_repo}/commits/{event.commit_id}"
        assert event.id is not None
        out: JSON = {
            "id": event.id,
            "node_id": node_id(_EVENT_PREFIX.get(event.kind, "E"), event.id),
            "url": f"{self.api}/repos/{repo.full_name}/issues/events/{event.id}",
            "actor": self.user(event.actor),
            "event": event.kind,
            "commit_id": event.commit_id,
            "commit_url": commit_url,
            "created_at": iso(event.created_at),
            "performed_via_github_app": None,
        }
        for key, value in event.extra.items():
            out[key] = self.user(value) if key == "assignee" else value
        return out

    def _association(self, repo: Repo, login: str) -> str:
        if login == repo.owner:
            return "OWNER"
        return "COLLABORATOR" if login in repo.assignable else "NONE"


def _maybe_iso(ts: int | None) -> str | None:
    return None if ts is None else iso(ts)
