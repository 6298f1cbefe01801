"""In-memory GitHub state: repositories, issues, pull requests, comments, timelines, the
rate-limit budget and scripted faults. The HTTP side lives in ``fake_github_app``."""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tests.support.clock import FakeClock, TimeLike
from tests.support.fake_github_model import (
    BULK_LABELS,
    JSON,
    Event,
    Issue,
    Pull,
    Repo,
    iso,
)
from tests.support.fake_github_mutations import FakeGitHubMutations
from tests.support.fake_github_render import Shapes
from tests.support.fake_tracker import bulk_text, fake_sha

if TYPE_CHECKING:
    from starlette.applications import Starlette


class FakeGitHub(FakeGitHubMutations):
    """A GitHub that lives in memory. Build state with the helpers, serve it with
    ``serve_fake_github(fake)`` or ``httpx.ASGITransport(app=fake.app)``.

    ``token`` is the only accepted credential and ``login`` the user it belongs to (the
    author of everything written through the API). Knobs: ``set_rate_limit``,
    ``fail_next``, ``refuse_writes``, ``since_lag``; the log is ``requests``.
    """

    client_url = "http://fake-github"

    def __init__(
        self,
        token: str = "ghp_fakeToken0000000000000000000000000000",
        *,
        login: str = "cotal-bot",
        repos: Iterable[str] = ("octo-org/hello-world",),
        assignable: Iterable[str] = (),
        clock: FakeClock | None = None,
        rate_limit: int = 5000,
        api_url: str = "https://api.github.com",
        html_url: str = "https://github.com",
    ) -> None:
        super().__init__(clock or FakeClock())
        self.token = token
        self.login = login
        self.api_url = api_url
        self.html_url = html_url
        self.repos: dict[str, Repo] = {}
        self._assignable = {login, *assignable}
        self._ids = itertools.count(1_000_000_001)
        # primary rate limit (``core``)
        self.rate_window = 3600
        self.rate_limit = rate_limit
        self.rate_remaining = rate_limit
        self.rate_reset = self.clock.seconds + self.rate_window
        self.primary_status = 403
        # seconds during which a fresh update is not yet visible to ``since`` queries
        self.since_lag = 0
        # the repositories a GitHub App installation was granted (``None``: the token is
        # no installation's): ``GET /installation/repositories`` lists them
        self.installation: set[str] | None = None
        self.unlisted: set[str] = set()  # left out of the organization's listing
        # whole bodies the next GraphQL requests are answered with (200), in order
        self.graphql_answers: deque[JSON] = deque()
        for name in repos:
            self.add_repo(name)

    # -- knobs -------------------------------------------------------------------------

    def set_rate_limit(
        self, remaining: int, *, limit: int | None = None, reset_in: int = 3600
    ) -> None:
        """The primary (``core``) budget: ``remaining`` requests until ``now + reset_in``,
        after which it refills to ``limit``. At 0 requests get 403 (``primary_status``)."""
        if limit is not None:
            self.rate_limit = limit
        self.rate_remaining = remaining
        self.rate_window = reset_in
        self.rate_reset = self.clock.seconds + reset_in

    def advance(self, seconds: int = 1) -> int:
        """Move the clock (whole seconds); returns the new epoch seconds."""
        self.clock.advance(seconds)
        return self.clock.seconds

    # -- building state ----------------------------------------------------------------

    def create_app(self) -> Starlette:
        from tests.support.fake_github_app import create_app

        return create_app(self)

    def auth_headers(self) -> dict[str, str]:
        """The headers a well-behaved client sends."""
        return {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def shapes(self, api: str | None = None) -> Shapes:
        return Shapes(self.repos, api or self.api_url, self.html_url)

    def issue(self, repo: str, number: int) -> Issue:
        """The record behind ``repo#number`` (an issue or a PR)."""
        return self.repos[repo].issues[number]

    def issue_json(self, repo: str, number: int) -> JSON:
        return self.shapes().issue(self.issue(repo, number), single=True)

    def add_issue(
        self,
        repo: str,
        title: str = "An issue",
        body: str | None = "",
        *,
        state: str = "open",
        state_reason: str | None = None,
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
        user: str = "octocat",
        created_at: TimeLike | None = None,
        updated_at: TimeLike | None = None,
        blocked_by: int = 0,
    ) -> JSON:
        """A new issue (no validation, no ``updated_at`` bump on others); its JSON."""
        return self.shapes().issue(
            self._new_issue(
                repo, title, body, state, state_reason, labels, assignees, user,
                created_at, updated_at, blocked_by,
            ),
            single=True,
        )  # fmt: skip

    def add_pull(
        self,
        repo: str,
        title: str = "A change",
        body: str | None = None,
        head_ref: str = "feature",
        head_sha: str | None = None,
        *,
        closes: Sequence[int] = (),
        user: str = "octocat",
        draft: bool = False,
        base_ref: str = "main",
        updated_at: TimeLike | None = None,
        head_repo: str | None = None,
        references: Sequence[tuple[str, int]] = (),
    ) -> JSON:
        """A pull request (an issue record with a pull part); each number in ``closes`` is
        written as "Fixes #N" into the body (unless a body is given) and gets a
        ``cross-referenced`` timeline event, as does each ``(repo, number)`` of
        ``references`` (issues of any repository, not written into the body: a mention
        in a comment or a commit message). ``head_repo`` names a fork the head branch
        lives in. As reported of GitHub, linking does not move the referenced issue's
        ``updated_at``. Returns the PR as the issues API shows it."""
        if body is None:
            body = "\n".join(f"Fixes #{n}" for n in closes) or "No description provided."
        issue = self._new_issue(repo, title, body, "open", None, (), (), user, None, updated_at, 0)
        if head_repo is not None:
            self.add_repo(head_repo)
        issue.pull = Pull(
            self._next_id(),
            head_ref,
            head_sha or fake_sha(head_repo or repo, head_ref),
            base_ref,
            draft,
            head_repo=head_repo,
        )
        for target_repo, number in [*((repo, n) for n in closes), *references]:
            self.cross_reference(target_repo, number, (repo, issue.number), actor=user)
        return self.shapes().issue(issue, single=True)

    def cross_reference(
        self, repo: str, number: int, source: tuple[str, int], *, actor: str = "octocat"
    ) -> None:
        """A ``cross-referenced`` event: ``source`` (an issue or pull request of any
        repository) mentioned the issue. No ``updated_at`` bump."""
        self.issue(repo, number).timeline.append(
            Event("cross-referenced", actor, self.clock.seconds, source=source)
        )

    def merge_pull(self, repo: str, number: int, *, by: str | None = None) -> str:
        """Merge a PR: it closes with a ``merged`` event, and every issue it "Fixes"
        closes as completed with a ``closed`` event carrying the merge commit. Returns the
        merge commit sha."""
        pr = self.issue(repo, number)
        assert pr.pull is not None, f"{repo}#{number} is not a pull request"
        actor = by or pr.user
        sha = fake_sha(repo, number, "merge")
        now = self.clock.seconds
        pr.pull.merged_at, pr.pull.merged_by, pr.pull.merge_commit_sha = now, actor, sha
        pr.timeline.append(self._event("merged", actor, commit_id=pr.pull.head_sha))
        self.set_state(pr, "closed", None, actor)
        for other in self.repos[repo].issues.values():
            if any(e.source == (repo, number) for e in other.timeline) and other.state == "open":
                self.set_state(other, "closed", "completed", actor, commit_id=sha)
                other.timeline[-1].closer = (repo, number)
        return sha

    def add_commit_reference(
        self,
        repo: str,
        number: int,
        sha: str,
        *,
        actor: str = "octocat",
        commit_repo: str | None = None,
    ) -> None:
        """A ``referenced`` event: a commit (of ``commit_repo``, by default the issue's
        own repository) mentioned the issue. No ``updated_at`` bump."""
        event = self._event("referenced", actor, commit_id=sha)
        event.commit_repo = commit_repo
        self.issue(repo, number).timeline.append(event)

    def connect(
        self,
        repo: str,
        number: int,
        pull: int,
        *,
        actor: str = "octocat",
        pull_repo: str | None = None,
    ) -> None:
        """A manual Development link: ``connected`` on both sides (no PR reference in the
        REST event, as documented; GraphQL's ``ConnectedEvent`` names it)."""
        source = (pull_repo or repo, pull)
        for target, n in ((repo, number), source):
            event = self._event("connected", actor)
            event.source = source if (target, n) == (repo, number) else (repo, number)
            self.issue(target, n).timeline.append(event)

    def touch(self, repo: str, number: int) -> str:
        """Bump ``updated_at`` to now; returns it (ISO)."""
        issue = self.issue(repo, number)
        issue.updated_at = self.clock.seconds
        return iso(self.clock.seconds)

    def close_issue(
        self,
        repo: str,
        number: int,
        reason: str = "completed",
        *,
        by: str = "octocat",
        commit_id: str | None = None,
    ) -> None:
        self.set_state(self.issue(repo, number), "closed", reason, by, commit_id=commit_id)

    def move_card(self, repo: str, number: int, status: str | None) -> None:
        """The issue's Projects v2 card moved to ``status`` (``None``: off the board). As
        on GitHub, the issue's ``updated_at`` does not move."""
        self.issue(repo, number).project_status = status

    def rename_label(self, repo: str, old: str, new: str) -> None:
        """A label renamed: every issue carrying it carries the new name, and (as on
        GitHub) no issue's ``updated_at`` moves."""
        labels = self.repos[repo].labels
        labels[new] = replace(labels.pop(old), name=new)
        for issue in self.repos[repo].issues.values():
            issue.labels = [new if name == old else name for name in issue.labels]

    def delete_label(self, repo: str, name: str) -> None:
        """A label deleted: gone from every issue, no issue's ``updated_at`` moved."""
        del self.repos[repo].labels[name]
        for issue in self.repos[repo].issues.values():
            issue.labels = [label for label in issue.labels if label != name]

    def add_comment(self, repo: str, number: int, body: str, *, user: str = "octocat") -> JSON:
        issue = self.issue(repo, number)
        return self.shapes().comment(issue, self.comment(issue, user, body))

    def delete_issue(self, repo: str, number: int) -> None:
        """Deleted: gone from lists; ``GET`` answers 410."""
        self.issue(repo, number).deleted = True

    def transfer_issue(self, repo: str, number: int, to_repo: str) -> int:
        """Moved to ``to_repo`` under a new number (same ``id``/``node_id``); the old URL
        answers 301 with ``Location``. Returns the new number."""
        old = self.issue(repo, number)
        target = self.add_repo(to_repo)
        new_number = target.next_number
        target.next_number += 1
        moved = Issue(**{**vars(old), "repo": to_repo, "number": new_number})
        moved.labels, moved.assignees = list(old.labels), list(old.assignees)
        moved.updated_at = self.clock.seconds
        for name in moved.labels:
            target.labels.setdefault(name, self.repos[repo].labels[name])
        target.issues[new_number] = moved
        old.moved_to = (to_repo, new_number)
        return new_number

    def bulk_issues(
        self,
        repo: str,
        n: int,
        *,
        closed_every: int = 0,
        step: int = 60,
        seed: int = 7,
    ) -> list[int]:
        """``n`` varied issues, created ``step`` s apart and ending at now; every
        ``closed_every``-th one closed (a third of those ``not_planned``). Numbers."""
        rng = random.Random(seed)
        start = self.clock.seconds - n * step
        numbers = []
        for k in range(n):
            closed = closed_every > 0 and (k + 1) % closed_every == 0
            reason = None
            if closed:
                reason = "not_planned" if (k // closed_every) % 3 == 2 else "completed"
            created = start + k * step
            title, body = bulk_text(k, rng)
            issue = self._new_issue(
                repo,
                title,
                body,
                "closed" if closed else "open",
                reason,
                rng.sample(BULK_LABELS, rng.randrange(0, 3)),
                ["octocat"] if rng.random() < 0.3 else [],
                rng.choice(("octocat", "hubot", "monalisa")),
                created,
                created + step // 2,
                0,
            )
            numbers.append(issue.number)
        return numbers
