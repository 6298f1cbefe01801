"""GitLab's JSON in neutral terms. Pure: no I/O.

``taskId`` is ``group/project#iid`` (the issue's full reference). Status comes from
``opened``/``closed`` plus labels, scoped ``workflow::`` labels included; on GitLab Free
several ``workflow::`` labels can coexist, and the first status rule that matches wins,
so the rule order decides (documented in docs/gitlab.md). Evidence: a related merge
request is a ``review`` (its URL) and a ``branch`` (its source branch), its head pipeline
a ``run`` (the pipeline URL), and a closing merge request's merge commit a ``commit``,
each attributed to the project it lives in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cotal_tasks.providers.hosted.mentions import mentioned_numbers
from cotal_tasks.providers.hosted.tracker import (
    Evidence,
    NativeState,
    TrackedIssue,
    epoch_ms,
    number_in,
)


def task_id(path: str, iid: int) -> str:
    return f"{path}#{iid}"


def iid_of(path: str, task: str) -> int | None:
    return number_in(path, task)


def path_of(issue: Mapping[str, Any]) -> str | None:
    """The project path from an issue's full reference (``group/project#12``)."""
    full = (issue.get("references") or {}).get("full")
    if isinstance(full, str) and "#" in full:
        return full.rsplit("#", 1)[0]
    return None


def tracked(path: str, issue: Mapping[str, Any], evidence: Iterable[Evidence] = ()) -> TrackedIssue:
    iid = int(issue["iid"])
    return TrackedIssue(
        number=iid,
        task_id=task_id(path, iid),
        title=str(issue.get("title") or ""),
        body=issue.get("description"),
        native=NativeState(
            state=str(issue.get("state") or "opened"),
            labels=tuple(
                str(label["name"] if isinstance(label, dict) else label)
                for label in issue.get("labels") or ()
            ),
        ),
        assignees=tuple(
            str(user["username"]) for user in issue.get("assignees") or () if user.get("username")
        ),
        created_at=epoch_ms(issue.get("created_at")),
        updated_at=epoch_ms(issue.get("updated_at")),
        evidence=tuple(evidence),
    )


def mentioned_issues(path: str, merge_request: Mapping[str, Any]) -> set[int]:
    text = f"{merge_request.get('title') or ''}\n{merge_request.get('description') or ''}"
    return mentioned_numbers(text, path)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _when(stamp: Any) -> int:
    try:
        return epoch_ms(stamp) if isinstance(stamp, str) else 0
    except ValueError:
        return 0


def merge_request_path(merge_request: Mapping[str, Any]) -> str | None:
    """The path of the project a merge request belongs to (``group/other!5``)."""
    references = merge_request.get("references")
    full = references.get("full") if isinstance(references, Mapping) else None
    if isinstance(full, str) and "!" in full:
        return full.rsplit("!", 1)[0]
    return None


def merge_request_evidence(
    merge_request: Mapping[str, Any],
    *,
    closed_it: bool,
    own_path: str,
    source_path: str | None = None,
) -> list[Evidence]:
    """A merge request as evidence, attributed to where each part lives: its ``review``
    is its own URL; its ``branch`` a plain name when the source branch is in
    ``own_path``, else ``group/fork:branch``; a merge ``commit`` of another project is
    ``group/other@sha``. A field of another shape is left out, never the rest."""
    at = _when(merge_request.get("updated_at")) or _when(merge_request.get("created_at"))
    target = merge_request_path(merge_request) or own_path
    found: list[Evidence] = []
    url = _text(merge_request.get("web_url"))
    if url:
        found.append(Evidence("review", url, at))
    branch = _text(merge_request.get("source_branch"))
    if branch:
        source = source_path or target
        own = source.lower() == own_path.lower()
        found.append(Evidence("branch", branch if own else f"{source}:{branch}", at))
    for key in ("head_pipeline", "pipeline"):
        pipeline = merge_request.get(key)
        run = _text(pipeline.get("web_url")) if isinstance(pipeline, Mapping) else None
        if run:
            found.append(Evidence("run", run, at))
            break
    sha = _text(merge_request.get("merge_commit_sha")) or _text(
        merge_request.get("squash_commit_sha")
    )
    if closed_it and sha:
        ref = sha if target.lower() == own_path.lower() else f"{target}@{sha}"
        found.append(Evidence("commit", ref, _when(merge_request.get("merged_at")) or at))
    return found
