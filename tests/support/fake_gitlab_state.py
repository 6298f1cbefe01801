"""In-memory GitLab state: users, projects, issues, merge requests with head pipelines,
notes, the rate-limit budget and scripted faults. The HTTP side lives in
``fake_gitlab_app``."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tests.support.clock import FakeClock, TimeLike, to_ms
from tests.support.fake_gitlab_context import API_PREFIX
from tests.support.fake_gitlab_model import (
    BULK_LABELS,
    ISSUE_STATES,
    JSON,
    MR_STATES,
    PIPELINE_STATUSES,
    Issue,
    MergeRequest,
    Note,
    Pipeline,
    Project,
    User,
    iso,
)
from tests.support.fake_gitlab_records import FakeGitLabRecords
from tests.support.fake_gitlab_render import Shapes
from tests.support.fake_tracker import bulk_text, fake_sha

if TYPE_CHECKING:
    from starlette.applications import Starlette


class FakeGitLab(FakeGitLabRecords):
    """A GitLab that lives in memory. Build state with the helpers, serve it with
    ``serve_fake_gitlab(fake)`` or ``httpx.ASGITransport(app=fake.app)``.

    ``token`` is the only accepted credential (``PRIVATE-TOKEN`` or ``Authorization:
    Bearer``) and ``username`` the user it belongs to (the author of everything written
    through the API). Knobs (``FakeGitLabKnobs``): ``set_rate_limit``, ``fail_next``,
    ``refuse_writes``, ``omit_rate_limit_headers``, ``max_offset``, ``keyset_supported``,
    ``count_limit``, ``exclusive_scoped_labels``; the log is ``requests`` (``calls``).
    """

    api_prefix = API_PREFIX
    client_url = "http://fake-gitlab" + API_PREFIX

    def __init__(
        self,
        token: str = "glpat-fakeToken0000000000",
        *,
        username: str = "cotal-bot",
        projects: Iterable[str] = ("acme/widgets",),
        clock: FakeClock | None = None,
        rate_limit: int = 2000,
        api_url: str = "https://gitlab.example.com/api/v4",
        web_url: str = "https://gitlab.example.com",
        max_offset: int | None = None,
        keyset_supported: bool = True,
        exclusive_scoped_labels: bool = True,
    ) -> None:
        super().__init__(
            clock or FakeClock(),
            rate_limit=rate_limit,
            max_offset=max_offset,
            keyset_supported=keyset_supported,
            exclusive_scoped_labels=exclusive_scoped_labels,
        )
        self.token = token
        self.username = username
        self.api_url = api_url
        self.web_url = web_url
        self.users: dict[str, User] = {}
        self.projects: dict[int, Project] = {}
        self.group_ids: dict[str, int] = {}  # a group's id, once a project named it
        self._user_ids = itertools.count(101)
        self._project_ids = itertools.count(4101)
        self._ids = itertools.count(150_000_001)
        self.add_user(username, bot=True)
        for path in projects:
            self.add_project(path)

    # -- clients and shapes ------------------------------------------------------------

    def create_app(self) -> Starlette:
        from tests.support.fake_gitlab_app import create_app

        return create_app(self)

    def auth_headers(self, *, bearer: bool = False) -> dict[str, str]:
        """The headers a well-behaved client sends."""
        if bearer:
            return {"Authorization": f"Bearer {self.token}"}
        return {"PRIVATE-TOKEN": self.token}

    def shapes(self, api: str | None = None) -> Shapes:
        return Shapes(self.users, self.projects, api or self.api_url, self.web_url)

    def issue_json(self, project: int | str, iid: int) -> JSON:
        issue = self.issue(project, iid)
        return self.shapes().issue(issue, single=True, mr_count=len(self.related_mrs(issue)))

    def merge_request_json(self, project: int | str, iid: int) -> JSON:
        return self.shapes().merge_request(self.merge_request(project, iid), full=True)

    def related_mrs(self, issue: Issue) -> list[MergeRequest]:
        """MRs related to ``issue`` (``related_merge_requests``): its own project's that
        mention or close it or that its description or comments name (``!M``), by iid,
        then other projects' that name it."""
        mrs = self.projects[issue.project_id].merge_requests.values()
        texts = [issue.description or "", *(n.body for n in issue.notes if not n.system)]
        named = {int(m) for text in texts for m in re.findall(r"(?<![\w/])!(\d+)\b", text)}
        own = sorted(
            (m for m in mrs if issue.iid in m.related or m.iid in named), key=lambda m: m.iid
        )
        key = (issue.project_id, issue.iid)
        others = [
            m
            for p in self.projects.values()
            if p.id != issue.project_id
            for m in p.merge_requests.values()
            if key in m.foreign
        ]
        return own + sorted(others, key=lambda m: (m.project_id, m.iid))

    def closing_mrs(self, issue: Issue) -> list[MergeRequest]:
        """MRs recorded as closing ``issue`` on merge, in any state (``closed_by``)."""
        mrs = self.projects[issue.project_id].merge_requests.values()
        return sorted((m for m in mrs if issue.iid in m.closes), key=lambda m: m.iid)

    # -- building issues ---------------------------------------------------------------

    def add_issue(
        self,
        project: int | str,
        title: str = "An issue",
        description: str | None = "",
        *,
        state: str = "opened",
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
        author: str = "alice",
        created_at: TimeLike | None = None,
        updated_at: TimeLike | None = None,
        closed_by: str | None = None,
        confidential: bool = False,
    ) -> JSON:
        """A new issue (no validation of labels, no scoped-label exclusivity); its JSON.
        Users named in ``author``/``assignees`` are created on the fly."""
        if state not in ISSUE_STATES:
            raise ValueError(f"state must be opened or closed, not {state!r}")
        proj = self.project(project)
        updated = self.clock.ms if updated_at is None else to_ms(updated_at)
        created = min(updated, self.clock.ms) if created_at is None else to_ms(created_at)
        issue = self._new_issue(proj, title, description, author, created, max(created, updated))
        issue.confidential = confidential
        for name in labels:
            self.ensure_label(proj, name)
            if name not in issue.labels:
                issue.labels.append(name)
        for username in assignees:
            self.add_user(username)
            issue.assignees.append(username)
        if state == "closed":
            issue.state, issue.closed_ms = "closed", issue.updated_ms
            issue.closed_by = self.add_user(closed_by or author).username
        return self.issue_json(proj.id, issue.iid)

    def bulk_issues(
        self,
        project: int | str,
        n: int,
        *,
        closed_every: int = 0,
        step: float = 60,
        seed: int = 7,
    ) -> list[int]:
        """``n`` varied issues created ``step`` s apart, the last at now, each updated
        half a step (plus some milliseconds) after creation; every ``closed_every``-th
        closed. Returns their iids (ascending)."""
        proj = self.project(project)
        rng = random.Random(seed)
        step_ms = round(step * 1000)
        start = self.clock.ms - (n - 1) * step_ms
        for username in ("alice", "bob", "carol"):
            self.add_user(username)
        iids = []
        for k in range(n):
            created = start + k * step_ms - rng.randrange(0, 1000)
            updated = min(created + step_ms // 2 + rng.randrange(0, 1000), self.clock.ms)
            title, body = bulk_text(k, rng)
            author = rng.choice(("alice", "bob", "carol"))
            issue = self._new_issue(proj, title, body, author, created, max(created, updated))
            for name in rng.sample(BULK_LABELS, rng.randrange(0, 3)):
                self.ensure_label(proj, name)
                issue.labels.append(name)
            if rng.random() < 0.3:
                issue.assignees.append("alice")
            if closed_every > 0 and (k + 1) % closed_every == 0:
                issue.state, issue.closed_ms, issue.closed_by = "closed", issue.updated_ms, "bob"
            iids.append(issue.iid)
        return iids

    def touch(self, project: int | str, iid: int) -> str:
        """Bump ``updated_at`` to now; returns it (ISO, with milliseconds)."""
        self.issue(project, iid).updated_ms = self.clock.ms
        return iso(self.clock.ms)

    def assign(self, project: int | str, iid: int, *usernames: str, by: str = "alice") -> None:
        """A person adds assignees in GitLab's UI (the system note says so)."""
        issue = self.issue(project, iid)
        for username in usernames:
            self.add_user(username)
        self.set_assignees(issue, [*issue.assignees, *usernames], by=self.add_user(by).username)

    def close_issue(self, project: int | str, iid: int, *, by: str = "alice") -> None:
        self.set_state(self.issue(project, iid), "closed", self.add_user(by).username)

    def add_note(self, project: int | str, iid: int, body: str, *, author: str = "alice") -> JSON:
        """A comment on the issue (bumps its ``updated_at``); the note's JSON."""
        issue = self.issue(project, iid)
        note = self.note(issue, self.add_user(author).username, body)
        return self.shapes().note(issue, note)

    def mention_in_commit(
        self,
        project: int | str,
        iid: int,
        sha: str,
        *,
        from_project: int | str | None = None,
        author: str = "alice",
        touch: bool = True,
    ) -> JSON:
        """A commit pushed to ``from_project`` (default: the issue's own) whose message
        names the issue, with no merge request: GitLab records it only as the system note
        "mentioned in commit <ref>", the reference written from the issue's project (the
        bare sha, ``other@sha`` in the same namespace, else ``group/other@sha``). Like
        any note it bumps the issue's ``updated_at`` unless ``touch=False``. The note's
        JSON."""
        issue = self.issue(project, iid)
        home = self.projects[issue.project_id]
        ref = sha
        if from_project is not None and self.project(from_project).id != home.id:
            source = self.project(from_project)
            same = source.namespace == home.namespace
            ref = f"{source.path if same else source.path_with_namespace}@{sha}"
        previous = issue.updated_ms
        note = self.note(issue, self.add_user(author).username, f"mentioned in commit {ref}")
        note.system = True
        if not touch:
            issue.updated_ms = previous
        return self.shapes().note(issue, note)

    def delete_issue(self, project: int | str, iid: int) -> None:
        """Deleted (by an owner): gone from every list; ``GET`` answers 404."""
        del self.project(project).issues[iid]

    # -- building merge requests -------------------------------------------------------

    def add_merge_request(
        self,
        project: int | str,
        title: str = "A change",
        description: str | None = None,
        source_branch: str = "feature",
        sha: str | None = None,
        *,
        closes: Sequence[int] = (),
        mentions: Sequence[int] = (),
        pipeline_status: str | None = "success",
        author: str = "alice",
        state: str = "opened",
        draft: bool = False,
        touch_issues: bool = True,
        source_project: int | str | None = None,
        foreign: Sequence[tuple[int | str, int]] = (),
    ) -> JSON:
        """A merge request. Each iid in ``closes`` is written as "Closes #N" into the
        description (unless one is given) and recorded as closed on merge; ``mentions``
        are only related. Each linked issue gets a system note "mentioned in merge request
        !M", which (as any note) bumps its ``updated_at`` unless ``touch_issues=False``.
        ``pipeline_status=None`` leaves ``head_pipeline`` null. Returns the MR JSON."""
        if state not in MR_STATES:
            raise ValueError(f"unknown merge request state {state!r}")
        proj = self.project(project)
        if description is None:
            description = "\n".join(f"Closes #{n}" for n in closes) or "No description."
        now = self.clock.ms
        mr = MergeRequest(
            proj.id,
            proj.next_mr_iid,
            self._next_id(),
            title,
            description,
            self.add_user(author).username,
            source_branch,
            sha or fake_sha(proj.path_with_namespace, source_branch),
            now,
            now,
            state=state,
            draft=draft,
            closes=list(closes),
            mentions=list(mentions),
        )
        proj.next_mr_iid += 1
        proj.merge_requests[mr.iid] = mr
        if source_project is not None:
            mr.source_project_id = self.project(source_project).id
        mr.foreign = [(self.project(ref).id, iid) for ref, iid in foreign]
        if pipeline_status is not None:
            self.set_pipeline_status(proj.id, mr.iid, pipeline_status)
        named = [(proj, iid, f"!{mr.iid}") for iid in mr.related]
        for project_id, iid in mr.foreign:
            reference = f"{proj.path_with_namespace}!{mr.iid}"
            named.append((self.projects[project_id], iid, reference))
        for where, iid, reference in named:
            issue = where.issues[iid]
            text = f"mentioned in merge request {reference}"
            note = Note(self._next_id(), mr.author, text, now, now, system=True)
            issue.notes.append(note)
            if touch_issues:
                issue.updated_ms = now
        return self.merge_request_json(proj.id, mr.iid)

    def set_pipeline_status(self, project: int | str, mr_iid: int, status: str) -> JSON:
        """Set (or start) the MR's head pipeline status; returns the pipeline JSON."""
        if status not in PIPELINE_STATUSES:
            raise ValueError(f"unknown pipeline status {status!r}")
        proj = self.project(project)
        mr = proj.merge_requests[mr_iid]
        now = self.clock.ms
        pipe = mr.head_pipeline
        if pipe is None or pipe.sha != mr.sha:
            pid = self._next_id()
            pipe = Pipeline(pid, pid % 100_000, mr.sha, mr.source_branch, status, now, now)
            mr.head_pipeline = pipe
        pipe.status, pipe.updated_ms = status, now
        return self.shapes().pipeline(proj, pipe, full=True)

    def merge_merge_request(self, project: int | str, iid: int, *, by: str | None = None) -> str:
        """Merge: the MR becomes ``merged`` and each issue it closes is closed by the
        merger (``closed_by`` user; the issue's ``updated_at`` moves). Returns the merge
        commit sha."""
        proj = self.project(project)
        mr = proj.merge_requests[iid]
        actor = self.add_user(by or mr.author).username
        now = self.clock.ms
        mr.state, mr.merged_ms, mr.merged_by = "merged", now, actor
        mr.merge_commit_sha = fake_sha(proj.path_with_namespace, iid, "merge")
        mr.updated_ms = now
        for issue_iid in mr.closes:
            self.set_state(proj.issues[issue_iid], "closed", actor)
        return mr.merge_commit_sha
