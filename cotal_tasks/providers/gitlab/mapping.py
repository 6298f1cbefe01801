"""GitLab's JSON in neutral terms. Pure: no I/O.

``taskId`` is ``group/project#iid`` (the issue's full reference). Status comes from
``opened``/``closed`` plus labels, scoped ``workflow::`` labels included; on GitLab Free
several ``workflow::`` labels can coexist, and the first status rule that matches wins,
so the rule order decides (documented in docs/gitlab.md). Evidence: a related merge
request is a ``review`` (its URL) and a ``branch`` (its source branch), its head pipeline
a ``run`` (the pipeline URL), a closing merge request's merge commit a ``commit``, and
a commit that mentions the issue (GitLab shows it only as a system note, "mentioned in
commit …") a ``commit``, each attributed to the project it lives in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cotal_tasks.providers.hosted import taskids
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_list, as_ms, as_str
from cotal_tasks.providers.hosted.mapping import WITHHELD, label_names
from cotal_tasks.providers.hosted.mentions import mentioned_numbers
from cotal_tasks.providers.hosted.tracker import Evidence, NativeState, TrackedIssue
from cotal_tasks.providers.hosted.writeback import mark_in

CONFIDENTIAL_TITLE = "(confidential issue)"

# GitLab's cross-reference system notes ("mentioned in commit 54f7727c…", "mentioned in
# commit group/other@54f7…", "mentioned in merge request !2", "… group/other!2"). A
# reference to a project of the same namespace is its bare path (``other@sha``).
_PATH = r"[\w.-]+(?:/[\w.-]+)*"
_COMMIT_NOTE = re.compile(
    rf"^mentioned in commit (?:(?P<path>{_PATH})@)?(?P<sha>[0-9a-f]{{7,40}})$"
)
_MR_NOTE = re.compile(rf"^mentioned in merge request (?:{_PATH})?!\d+$")


def task_id(path: str, iid: int) -> str:
    return taskids.task_id(path, iid)


def iid_of(path: str, task: str) -> int | None:
    return taskids.number_in(path, task)


def path_of(issue: Mapping[str, Any]) -> str | None:
    """The project path from an issue's full reference (``group/project#12``)."""
    full = as_str(as_dict(issue.get("references")).get("full"))
    if full is not None and "#" in full:
        return full.rsplit("#", 1)[0] or None
    return None


def issue_iid(issue: Mapping[str, Any]) -> int:
    """The issue's iid; an item without one cannot be a task (``ValueError``)."""
    iid = as_int(issue.get("iid"))
    if iid is None or iid >= 10**taskids.NUMBER_DIGITS:
        raise ValueError("the item has no issue iid")
    return iid


def is_duplicate(issue: Mapping[str, Any]) -> bool:
    """Closed as a duplicate of another issue (``_links.closed_as_duplicate_of``)."""
    return bool(as_str(as_dict(issue.get("_links")).get("closed_as_duplicate_of")))


def tracked(
    path: str,
    issue: Mapping[str, Any],
    evidence: Iterable[Evidence] = (),
    *,
    include_confidential: bool = False,
) -> TrackedIssue:
    """An issue in neutral terms; a field of the wrong shape is read as absent.

    A duplicate reads as ``closed/duplicate`` (as on GitHub); an issue moved to another
    project (``moved_to_id``) is gone as ``moved``. A confidential issue, unless the
    operator opted in, is withheld: gone as ``confidential``, with no title, description,
    assignees or evidence, so nothing of it reaches a board every reader can see.
    """
    iid = issue_iid(issue)
    state = as_str(issue.get("state")) or "opened"
    withheld = issue.get("confidential") is True and not include_confidential
    fate = None
    if withheld:
        fate = WITHHELD
    elif (as_int(issue.get("moved_to_id")) or 0) > 0:  # ids start at 1: 0 is "not moved"
        fate = "moved"
    return TrackedIssue(
        number=iid,
        task_id=task_id(path, iid),
        title=CONFIDENTIAL_TITLE if withheld else as_str(issue.get("title")) or "",
        body=None if withheld else as_str(issue.get("description")),
        native=NativeState(
            state=state,
            state_reason="duplicate" if state == "closed" and is_duplicate(issue) else None,
            labels=() if withheld else label_names(issue.get("labels")),
        ),
        assignees=()
        if withheld
        else tuple(
            name
            for user in as_list(issue.get("assignees"))
            if (name := as_str(as_dict(user).get("username")))
        ),
        created_at=as_ms(issue.get("created_at")),
        updated_at=as_ms(issue.get("updated_at")),
        evidence=() if withheld else tuple(evidence),
        gone=fate,
        mark=mark_in(issue.get("description")),  # a write's id, never the issue's text
        milestone=None if withheld else as_str(as_dict(issue.get("milestone")).get("title")),
        issue_type=as_str(issue.get("issue_type")),
        closed_at=as_ms(issue.get("closed_at")) or None,
    )


def gone(path: str, iid: int, fate: str) -> TrackedIssue:
    """An issue GitLab answered for as gone ("deleted": 404 while the project's issues
    read)."""
    return TrackedIssue.vanished(iid, task_id(path, iid), fate)


def mentioned_issues(
    path: str, merge_request: Mapping[str, Any], most: int | None = None
) -> set[int]:
    """The issue iids of the project ``path`` a merge request's title or description
    mentions (``most``: read no further once more than that many are found)."""
    title, text = as_str(merge_request.get("title")), as_str(merge_request.get("description"))
    return mentioned_numbers(f"{title or ''}\n{text or ''}", path, autolinks=False, most=most)


def merge_request_path(merge_request: Mapping[str, Any]) -> str | None:
    """The path of the project a merge request belongs to (``group/other!5``)."""
    full = as_str(as_dict(merge_request.get("references")).get("full"))
    if full is not None and "!" in full:
        return full.rsplit("!", 1)[0] or None
    return None


def merge_request_evidence(
    merge_request: Mapping[str, Any],
    *,
    closed_it: bool,
    own_path: str,
    source_path: str | None = None,
    target_path: str | None = None,
) -> list[Evidence]:
    """A merge request as evidence, attributed to where each part lives: its ``review``
    is its own URL; its ``branch`` a plain name when the source branch is in
    ``own_path``, else ``group/fork:branch``; a merge ``commit`` of another project is
    ``group/other@sha``. The project it lives in is its ``references.full``, else
    ``target_path`` (the caller's read of another project), else ``own_path``. The
    commit that landed is the merge or squash commit, or, for a fast-forward merge
    (neither), the head ``sha`` the target branch moved to. A field of another shape is
    left out, never the rest."""
    mr = as_dict(merge_request)
    at = as_ms(mr.get("updated_at")) or as_ms(mr.get("created_at"))
    target = merge_request_path(mr) or target_path or own_path
    found: list[Evidence] = []
    if url := as_str(mr.get("web_url")):
        found.append(Evidence("review", url, at))
    if branch := as_str(mr.get("source_branch")):
        source = source_path or target
        own = source.lower() == own_path.lower()
        found.append(Evidence("branch", branch if own else f"{source}:{branch}", at))
    for key in ("head_pipeline", "pipeline"):
        if run := as_str(as_dict(mr.get(key)).get("web_url")):
            found.append(Evidence("run", run, at))
            break
    sha = as_str(mr.get("merge_commit_sha")) or as_str(mr.get("squash_commit_sha"))
    if sha is None and as_str(mr.get("state")) == "merged":
        sha = as_str(mr.get("sha"))  # a fast-forward merge: the head is what landed
    if closed_it and sha:
        ref = sha if target.lower() == own_path.lower() else f"{target}@{sha}"
        found.append(Evidence("commit", ref, as_ms(mr.get("merged_at")) or at))
    return found


def _full_path(path: str, own_path: str) -> str:
    """A reference's project path as GitLab shortens it, made whole: a bare project name
    lives in the namespace of ``own_path``."""
    if "/" in path:
        return path
    namespace = own_path.rsplit("/", 1)[0] if "/" in own_path else ""
    return f"{namespace}/{path}" if namespace else path


def note_evidence(note: Mapping[str, Any], own_path: str) -> list[Evidence]:
    """A system note saying a commit mentioned the issue, as ``commit`` evidence: the sha
    when the commit is in ``own_path``, ``group/other@sha`` when it lives elsewhere. Any
    other note (a comment, another system note) says nothing."""
    body = as_str(note.get("body"))
    if note.get("system") is not True or body is None:
        return []
    match = _COMMIT_NOTE.match(body.strip())
    if match is None:
        return []
    sha, path = match.group("sha"), match.group("path")
    at = as_ms(note.get("created_at")) or as_ms(note.get("updated_at"))
    if path is None:
        return [Evidence("commit", sha, at)]
    where = _full_path(path, own_path)
    own = where.lower() == own_path.lower()
    return [Evidence("commit", sha if own else f"{where}@{sha}", at)]


def names_merge_request(note: Mapping[str, Any]) -> bool:
    """A system note saying a merge request (of this or another project) mentioned the
    issue: its related merge requests are worth a read."""
    body = as_str(note.get("body"))
    return note.get("system") is True and body is not None and bool(_MR_NOTE.match(body.strip()))
