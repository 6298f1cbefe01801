"""Jira Cloud's JSON in neutral terms. Pure: no I/O.

An issue ``DEMO-12`` of project ``DEMO`` is the task ``DEMO#12``. Its native state is
``closed`` when its status is in the Done category and ``open`` otherwise; the rules
read the category (``extra["category"]``), the status name (``extra["status"]``), the
resolution (``state_reason``) and the labels, and ``statusSource`` is the status name
(``source``). The description is Atlassian Document Format, rendered to plain text.
An issue with an issue security level is withheld unless the operator opted in. An
issue whose key names another project has moved. Evidence comes from the issue's remote
links to GitHub and GitLab: a pull or merge request is a ``review``, a commit a
``commit`` (``owner/repo@sha``), a CI run or pipeline a ``run``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cotal_tasks.providers.hosted import taskids
from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_ms, as_str, at_path
from cotal_tasks.providers.hosted.links import url_evidence
from cotal_tasks.providers.hosted.mapping import WITHHELD
from cotal_tasks.providers.hosted.tracker import Evidence, NativeState, TrackedIssue
from cotal_tasks.providers.jira import adf
from cotal_tasks.providers.jira.config import CATEGORY, STATUS

SECURED_TITLE = "(restricted issue)"
# What the sync asks the search for: only what the mapping reads.
FIELDS = (
    "summary",
    "description",
    "status",
    "resolution",
    "labels",
    "assignee",
    "created",
    "updated",
    "security",
    "project",
    "fixVersions",
    "issuetype",
    "resolutiondate",
)
CATEGORIES = frozenset({"new", "indeterminate", "done"})
# A claim mark among the labels the write plan compares: the issue stands in the In
# Progress category. Never a Jira label (``writeback`` never sends it).
IN_PROGRESS = "\x00in-progress"

_KEY = re.compile(r"^([A-Z][A-Z0-9_]*)-(\d{1,18})$")


def issue_key(project: str, number: int) -> str:
    return f"{project}-{number}"


def split_key(key: Any) -> tuple[str, int] | None:
    """``("DEMO", 12)`` from ``"DEMO-12"``; ``None`` for anything else."""
    match = _KEY.match(key) if isinstance(key, str) else None
    if match is None:
        return None
    return match.group(1), int(match.group(2))


def task_id(project: str, number: int) -> str:
    return taskids.task_id(project, number)


def number_of(project: str, task: str) -> int | None:
    return taskids.number_in(project, task)


def category_of(issue: Mapping[str, Any]) -> str:
    """The status category key; one Jira does not document (``undefined``) reads as new."""
    key = as_str(at_path(issue, "fields", "status", "statusCategory", "key"))
    return key if key in CATEGORIES else "new"


def is_secured(issue: Mapping[str, Any]) -> bool:
    return bool(as_dict(as_dict(issue.get("fields")).get("security")))


def native_of(fields: Mapping[str, Any], category: str) -> NativeState:
    status = as_str(as_dict(fields.get("status")).get("name")) or category
    labels = tuple(label for label in as_list(fields.get("labels")) if isinstance(label, str))
    if category == "indeterminate":
        labels += (IN_PROGRESS,)
    return NativeState(
        state="closed" if category == "done" else "open",
        state_reason=as_str(as_dict(fields.get("resolution")).get("name")),
        labels=labels,
        extra={CATEGORY: category, STATUS: status},
        source=status,
    )


def tracked(
    project: str,
    issue: Mapping[str, Any],
    evidence: Iterable[Evidence] = (),
    *,
    include_secured: bool = False,
    number: int | None = None,
) -> TrackedIssue:
    """An issue in neutral terms; a field of the wrong shape is read as absent.

    ``number`` is the issue asked for (a fetch by key): an answer whose key names
    another project is that issue, moved. An issue without a key of ``project`` is not
    an issue of the endpoint (``ValueError``)."""
    parsed = split_key(issue.get("key"))
    if parsed is None:
        raise ValueError("the item has no issue key")
    where, found = parsed
    if where != project and number is None:
        raise ValueError("the item is an issue of another project")
    own = number if number is not None else found
    if own >= 10**taskids.NUMBER_DIGITS:
        raise ValueError("the issue number is out of range")
    fields = as_dict(issue.get("fields"))
    withheld = is_secured(issue) and not include_secured
    fate = None
    if where != project:
        fate = "moved"
    elif withheld:
        fate = WITHHELD
    assignee = as_str(as_dict(fields.get("assignee")).get("accountId"))
    native = native_of(fields, category_of(issue))
    return TrackedIssue(
        number=own,
        task_id=task_id(project, own),
        title=SECURED_TITLE if withheld else as_str(fields.get("summary")) or "",
        body=None if withheld else adf.to_text(fields.get("description")),
        native=NativeState("open") if withheld else native,
        assignees=() if withheld or assignee is None else (assignee,),
        created_at=as_ms(fields.get("created")),
        updated_at=as_ms(fields.get("updated")),
        evidence=() if withheld else tuple(evidence),
        gone=fate,
        mark=mark_of(issue),
        milestone=None if withheld else fix_version(fields),
        issue_type=as_str(as_dict(fields.get("issuetype")).get("name")),
        closed_at=as_ms(fields.get("resolutiondate")) or None,
    )


def fix_version(fields: Mapping[str, Any]) -> str | None:
    """The issue's fix version (the scope's milestone): the first one it names."""
    for version in as_list(fields.get("fixVersions")):
        if name := as_str(as_dict(version).get("name")):
            return name
    return None


# The entity property a write's mark rides on (an issue's or a comment's), where Jira
# shows nothing of it to a reader.
PROPERTY = "cotal-tasks"


def mark_of(item: Mapping[str, Any]) -> str | None:
    """The write mark an issue carries in its property (read when the search asked for
    it), or ``None``."""
    return as_str(at_path(item, "properties", PROPERTY, "write"))


def comment_mark(comment: Any) -> str | None:
    """The write mark a comment carries in its property, or ``None``."""
    for prop in as_list(as_dict(comment).get("properties")):
        prop = as_dict(prop)
        if prop.get("key") == PROPERTY:
            return as_str(at_path(prop, "value", "write"))
    return None


def gone(project: str, number: int, fate: str) -> TrackedIssue:
    return TrackedIssue.vanished(number, task_id(project, number), fate)


def link_evidence(link: Mapping[str, Any], at: int) -> list[Evidence]:
    """A remote link as evidence, when it points at a GitHub or GitLab pull or merge
    request, commit or CI run (``hosted.links``). Any other link says nothing."""
    return url_evidence(as_str(at_path(link, "object", "url")), at)
