"""The fake GitHub's mutations, shared by the test-facing helpers (``FakeGitHub``) and the
API's handlers: state, title, labels, assignees, comments and new issues, each recorded on
the issue's timeline as GitHub records it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from tests.support.clock import TimeLike
from tests.support.fake_github_model import (
    JSON,
    STATE_REASONS,
    Comment,
    Event,
    Issue,
    Label,
    Repo,
    to_epoch,
)
from tests.support.fake_tracker import FakeTracker


class FakeGitHubMutations(FakeTracker):
    """The mutations; ``FakeGitHub`` holds the state they change."""

    login: str
    repos: dict[str, Repo]
    _ids: Iterator[int]
    _assignable: set[str]

    def add_repo(self, full_name: str, *, assignable: Iterable[str] = ()) -> Repo:
        """A repository (idempotent). ``assignable`` adds logins that
        ``GET /repos/{o}/{r}/assignees/{login}`` accepts (``login`` always is)."""
        if "/" not in full_name:
            raise ValueError(f"repository must be owner/name, not {full_name!r}")
        repo = self.repos.get(full_name)
        if repo is None:
            repo = Repo(full_name, self._next_id(), self.clock.seconds - 86_400 * 365)
            repo.assignable |= self._assignable
            self.repos[full_name] = repo
        repo.assignable |= set(assignable)
        return repo

    # -- mutations shared by helpers and the API ---------------------------------------

    def set_state(
        self,
        issue: Issue,
        state: str,
        reason: str | None,
        actor: str,
        *,
        commit_id: str | None = None,
    ) -> None:
        """Close or reopen (no-op if already there). Closing defaults the reason to
        ``completed``; reopening sets ``reopened``."""
        if state == issue.state:
            return
        now = self.clock.seconds
        if state == "closed":
            # pull requests carry no state_reason
            issue.state = "closed"
            issue.state_reason = None if issue.pull else reason or "completed"
            issue.closed_at, issue.closed_by = now, actor
            extra: JSON = {"state_reason": issue.state_reason}
            issue.timeline.append(self._event("closed", actor, commit_id=commit_id, **extra))
        else:
            issue.state, issue.state_reason = "open", None if issue.pull else "reopened"
            issue.closed_at = None
            issue.timeline.append(self._event("reopened", actor, state_reason="reopened"))
        issue.updated_at = now

    def set_title(self, issue: Issue, title: str, actor: str) -> None:
        if title != issue.title:
            rename = {"from": issue.title, "to": title}
            issue.timeline.append(self._event("renamed", actor, rename=rename))
            issue.title = title
        issue.updated_at = self.clock.seconds

    def add_labels(self, issue: Issue, names: Iterable[str], actor: str) -> None:
        repo = self.repos[issue.repo]
        for name in names:
            if name not in repo.labels:
                repo.labels[name] = Label.make(name, self._next_id())
            if name not in issue.labels:
                issue.labels.append(name)
                label = {"name": name, "color": repo.labels[name].color}
                issue.timeline.append(self._event("labeled", actor, label=label))
        issue.updated_at = self.clock.seconds

    def remove_label(self, issue: Issue, name: str, actor: str) -> None:
        issue.labels.remove(name)
        label = {"name": name, "color": self.repos[issue.repo].labels[name].color}
        issue.timeline.append(self._event("unlabeled", actor, label=label))
        issue.updated_at = self.clock.seconds

    def add_assignees(self, issue: Issue, logins: Iterable[str], actor: str) -> None:
        for login in logins:
            if login not in issue.assignees:
                issue.assignees.append(login)
                issue.timeline.append(self._event("assigned", actor, assignee=login))
        issue.updated_at = self.clock.seconds

    def remove_assignees(self, issue: Issue, logins: Iterable[str], actor: str) -> None:
        for login in logins:
            if login in issue.assignees:
                issue.assignees.remove(login)
                issue.timeline.append(self._event("unassigned", actor, assignee=login))
        issue.updated_at = self.clock.seconds

    def add_milestone(self, repo: str, title: str) -> int:
        """A milestone of ``repo`` (idempotent by title); its number."""
        milestones = self.repos[repo].milestones
        for number, held in milestones.items():
            if held == title:
                return number
        number = max(milestones, default=0) + 1
        milestones[number] = title
        return number

    def set_milestone(self, issue: Issue, title: str | None, actor: str) -> None:
        """Put the issue in the milestone titled ``title`` (made if new), or in none; the
        ``milestoned``/``demilestoned`` events GitHub records."""
        if issue.milestone is not None:
            old = self.repos[issue.repo].milestones[issue.milestone]
            issue.timeline.append(self._event("demilestoned", actor, milestone={"title": old}))
            issue.milestone = None
        if title is not None:
            issue.milestone = self.add_milestone(issue.repo, title)
            issue.timeline.append(self._event("milestoned", actor, milestone={"title": title}))
        issue.updated_at = self.clock.seconds

    def set_issue_type(self, issue: Issue, name: str | None, actor: str) -> None:
        kind = "issue_type_removed" if name is None else "issue_type_changed"
        issue.issue_type = name
        issue.timeline.append(self._event(kind, actor))
        issue.updated_at = self.clock.seconds

    def comment(self, issue: Issue, user: str, body: str) -> Comment:
        now = self.clock.seconds
        comment = Comment(self._next_id(), user, body, now, now)
        issue.comments.append(comment)
        issue.timeline.append(Event("commented", user, now, comment=comment))
        issue.updated_at = now
        return comment

    def create_issue(
        self,
        repo: str,
        title: str,
        body: str | None,
        labels: Sequence[str],
        assignees: Sequence[str],
        user: str,
    ) -> Issue:
        issue = self._new_issue(repo, title, body, "open", None, (), (), user, None, None, 0)
        self.add_labels(issue, labels, user)
        self.add_assignees(issue, assignees, user)
        return issue

    # -- internals ---------------------------------------------------------------------

    def _next_id(self) -> int:
        return next(self._ids)

    def _event(
        self, kind: str, actor: str, *, commit_id: str | None = None, **extra: object
    ) -> Event:
        return Event(kind, actor, self.clock.seconds, self._next_id(), commit_id, extra=dict(extra))

    def _new_issue(
        self,
        repo_name: str,
        title: str,
        body: str | None,
        state: str,
        state_reason: str | None,
        labels: Iterable[str],
        assignees: Iterable[str],
        user: str,
        created_at: TimeLike | None,
        updated_at: TimeLike | None,
        blocked_by: int,
    ) -> Issue:
        if state not in ("open", "closed"):
            raise ValueError(f"state must be open or closed, not {state!r}")
        if state_reason is not None and state_reason not in STATE_REASONS:
            raise ValueError(f"unknown state_reason {state_reason!r}")
        repo = self.add_repo(repo_name)
        updated = self.clock.seconds if updated_at is None else to_epoch(updated_at)
        created = min(updated, self.clock.seconds) if created_at is None else to_epoch(created_at)
        issue = Issue(
            repo_name,
            repo.next_number,
            self._next_id(),
            title,
            body,
            user,
            created,
            max(created, updated),
            blocked_by=blocked_by,
        )
        repo.next_number += 1
        repo.issues[issue.number] = issue
        for name in labels:
            if name not in repo.labels:
                repo.labels[name] = Label.make(name, self._next_id())
            issue.labels.append(name)
        issue.assignees.extend(assignees)
        if state == "closed":
            issue.state, issue.state_reason = "closed", state_reason or "completed"
            issue.closed_at, issue.closed_by = issue.updated_at, user
            closed = Event("closed", user, issue.updated_at, self._next_id())
            closed.extra["state_reason"] = issue.state_reason
            issue.timeline.append(closed)
        else:
            issue.state_reason = state_reason if state_reason == "reopened" else None
        return issue
