"""The fake GitLab's records and the mutations the test-facing helpers (``FakeGitLab``) and
the API's handlers share: users and projects looked up, state, labels (scoped ones kept
exclusive), assignees, notes and new issues."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from tests.support.fake_gitlab_knobs import FakeGitLabKnobs
from tests.support.fake_gitlab_model import (
    Issue,
    Label,
    MergeRequest,
    Note,
    Project,
    User,
    iso,
    scope_of,
)


class FakeGitLabRecords(FakeGitLabKnobs):
    """The records and their mutations; ``FakeGitLab`` builds on them."""

    username: str
    users: dict[str, User]
    projects: dict[int, Project]
    _user_ids: Iterator[int]
    _project_ids: Iterator[int]
    _ids: Iterator[int]
    group_ids: dict[str, int]

    # -- users and projects ------------------------------------------------------------

    def add_user(self, username: str, name: str | None = None, *, bot: bool = False) -> User:
        """A user (idempotent); ``name`` defaults to the capitalized username."""
        user = self.users.get(username)
        if user is None:
            display = name or username.replace(".", " ").replace("-", " ").title()
            user = User(next(self._user_ids), username, display, bot=bot)
            self.users[username] = user
        return user

    def user_by_id(self, user_id: int) -> User | None:
        return next((u for u in self.users.values() if u.id == user_id), None)

    def add_project(self, path_with_namespace: str, *, project_id: int | None = None) -> Project:
        """A project (idempotent by path), e.g. ``acme/widgets``."""
        if "/" not in path_with_namespace:
            raise ValueError(f"project must be namespace/path, not {path_with_namespace!r}")
        existing = self.find_project(path_with_namespace)
        if existing is not None:
            return existing
        pid = project_id if project_id is not None else next(self._project_ids)
        name = path_with_namespace.rsplit("/", 1)[1].replace("-", " ").title()
        project = Project(pid, path_with_namespace, name, self.clock.ms - 86_400_000 * 365)
        self.projects[pid] = project
        return project

    def project(self, ref: int | str) -> Project:
        """A project by numeric id or ``namespace/path`` (case-insensitive)."""
        project = self.find_project(ref)
        if project is None:
            raise KeyError(f"no project {ref!r}")
        return project

    def find_project(self, ref: int | str) -> Project | None:
        if isinstance(ref, int) or ref.isdigit():
            return self.projects.get(int(ref))
        wanted = ref.lower()
        return next(
            (p for p in self.projects.values() if p.path_with_namespace.lower() == wanted), None
        )

    # -- groups: every namespace of a project is one ------------------------------------

    @property
    def groups(self) -> dict[str, int]:
        """Group full path -> its id: every namespace a project sits in, and its parents."""
        found: dict[str, int] = {}
        for project in sorted(self.projects.values(), key=lambda p: p.id):
            parts = project.namespace.split("/")
            for depth in range(1, len(parts) + 1):
                path = "/".join(parts[:depth])
                found.setdefault(path, self.group_ids.setdefault(path, 9001 + len(self.group_ids)))
        return found

    def find_group(self, ref: str) -> str | None:
        """A group's full path, by its id or its path (case-insensitive)."""
        groups = self.groups
        if ref.isdigit():
            return next((path for path, gid in groups.items() if gid == int(ref)), None)
        return next((path for path in groups if path.lower() == ref.lower()), None)

    def group_projects(self, group: str, *, archived: bool = False) -> list[Project]:
        """The projects of ``group`` and its subgroups (archived ones only if asked)."""
        prefix = group.lower() + "/"
        return [
            p
            for p in self.projects.values()
            if p.path_with_namespace.lower().startswith(prefix) and (archived or not p.archived)
        ]

    def transfer_project(self, project: int | str, namespace: str) -> Project:
        """An owner moves the project to another namespace: its path changes, its id and
        its issues (their ``updated_at`` included) stay."""
        moved = self.project(project)
        moved.path_with_namespace = f"{namespace}/{moved.path}"
        return moved

    def issue(self, project: int | str, iid: int) -> Issue:
        return self.project(project).issues[iid]

    def add_milestone(self, project: int | str, title: str) -> int:
        """A milestone of ``project``; its id (unique across projects, as GitLab's)."""
        proj = self.project(project)
        milestone = next(self._ids)
        proj.milestones[milestone] = title
        return milestone

    def set_milestone(self, issue: Issue, milestone: int | None) -> None:
        """A person sets (or, with ``None``, removes) the issue's milestone."""
        issue.milestone_id, issue.updated_ms = milestone, self.clock.ms

    def merge_request(self, project: int | str, iid: int) -> MergeRequest:
        return self.project(project).merge_requests[iid]

    # -- mutations shared by the helpers and the API -------------------------------------

    def set_state(self, issue: Issue, state: str, actor: str) -> bool:
        """Close or reopen; a no-op (``False``) if already there."""
        if state == issue.state:
            return False
        now = self.clock.ms
        if state == "closed":
            issue.state, issue.closed_ms, issue.closed_by = "closed", now, actor
        else:
            issue.state, issue.closed_ms, issue.closed_by = "opened", None, None
        issue.updated_ms = now
        return True

    def normalize_labels(self, names: Iterable[str]) -> list[str]:
        """Deduplicated, and (``exclusive_scoped_labels``) the last label of each scope
        wins, as GitLab Premium applies scoped labels."""
        out: list[str] = []
        for name in names:
            if name in out:
                continue
            scope = scope_of(name)
            if self.exclusive_scoped_labels and scope is not None:
                out = [n for n in out if scope_of(n) != scope]
            out.append(name)
        return out

    def set_labels(self, issue: Issue, names: Iterable[str]) -> bool:
        """Replace the labels (creating unknown ones in the project); ``True`` if changed."""
        proj = self.projects[issue.project_id]
        new = self.normalize_labels(names)
        for name in new:
            self.ensure_label(proj, name)
        if new == issue.labels:
            return False
        issue.labels = new
        issue.updated_ms = self.clock.ms
        return True

    def set_assignees(self, issue: Issue, usernames: Iterable[str], by: str | None = None) -> bool:
        """Replace the assignees; ``by`` (who did it) also records GitLab's system note
        (``SystemNotes::IssuablesService#change_issuable_assignees``)."""
        new = list(dict.fromkeys(usernames))
        if new == issue.assignees:
            return False
        old = issue.assignees
        issue.assignees = new
        issue.updated_ms = self.clock.ms
        if by is not None:
            self.note(issue, by, assignee_note(old, new), system=True)
        return True

    def note(self, issue: Issue, author: str, body: str, *, system: bool = False) -> Note:
        now = self.clock.ms
        note = Note(self._next_id(), author, body, now, now, system=system)
        issue.notes.append(note)
        issue.updated_ms = now
        return note

    def create_issue(
        self,
        project: Project,
        title: str,
        description: str | None,
        labels: Sequence[str],
        assignees: Sequence[str],
        author: str,
    ) -> Issue:
        now = self.clock.ms
        issue = self._new_issue(project, title, description, author, now, now)
        issue.labels = self.normalize_labels(labels)
        for name in issue.labels:
            self.ensure_label(project, name)
        issue.assignees = list(dict.fromkeys(assignees))
        return issue

    # -- internals ---------------------------------------------------------------------

    def _next_id(self) -> int:
        return next(self._ids)

    def ensure_label(self, project: Project, name: str) -> Label:
        label = project.labels.get(name)
        if label is None:
            label = Label.make(self._next_id() % 10_000_000, name, self.clock.ms)
            project.labels[name] = label
        return label

    def _new_issue(
        self,
        project: Project,
        title: str,
        description: str | None,
        author: str,
        created_ms: int,
        updated_ms: int,
    ) -> Issue:
        issue = Issue(
            project.id,
            project.next_iid,
            self._next_id(),
            title,
            description,
            self.add_user(author).username,
            created_ms,
            updated_ms,
        )
        project.next_iid += 1
        project.issues[issue.iid] = issue
        return issue

    def describe(self, project: int | str, iid: int) -> str:
        """``acme/widgets#3 [closed] updated 2026-…`` (for assertion messages)."""
        issue = self.issue(project, iid)
        ref = f"{self.project(project).path_with_namespace}#{iid}"
        return f"{ref} [{issue.state}] updated {iso(issue.updated_ms)}"


def _sentence(names: list[str]) -> str:
    """Rails' ``to_sentence`` of ``@name`` references."""
    refs = [f"@{n}" for n in names]
    return refs[0] if len(refs) == 1 else ", ".join(refs[:-1]) + " and " + refs[-1]


def assignee_note(old: list[str], new: list[str]) -> str:
    """The system note GitLab writes when an issue's assignees change."""
    added = [n for n in new if n not in old]
    removed = [n for n in old if n not in new]
    parts = [f"assigned to {_sentence(added)}"] if added else []
    parts += [f"unassigned {_sentence(removed)}"] if removed else []
    return " and ".join(parts)
