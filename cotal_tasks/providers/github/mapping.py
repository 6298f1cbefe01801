"""GitHub's JSON in neutral terms. Pure: no I/O.

``taskId`` is ``owner/repo#number``: stable and readable. Pull requests come through the
issues list too; they are never tasks, but the issues they mention are worth a look for
evidence (read in ``evidence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cotal_tasks.providers.github.config import PROJECT_STATUS
from cotal_tasks.providers.hosted import taskids
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_list, as_ms, as_str
from cotal_tasks.providers.hosted.mapping import label_names
from cotal_tasks.providers.hosted.mentions import mentioned_numbers
from cotal_tasks.providers.hosted.tracker import Evidence, NativeState, TrackedIssue
from cotal_tasks.providers.hosted.writeback import mark_in


def task_id(repository: str, number: int) -> str:
    return taskids.task_id(repository, number)


def number_of(repository: str, task: str) -> int | None:
    return taskids.number_in(repository, task)


def is_pull_request(item: Mapping[str, Any]) -> bool:
    """True for a pull request as the issues API shows it. An issue from before 2013 carries
    ``"pull_request": {"html_url": null, ...}``: with no URL it is an issue."""
    pull = as_dict(item.get("pull_request"))
    return bool(as_str(pull.get("html_url")) or as_str(pull.get("url")))


def issue_number(item: Mapping[str, Any]) -> int:
    """The issue's number; an item without one cannot be a task (``ValueError``)."""
    number = as_int(item.get("number"))
    if number is None or number >= 10**taskids.NUMBER_DIGITS:
        raise ValueError("the item has no issue number")
    return number


def tracked(
    repository: str,
    item: Mapping[str, Any],
    evidence: Iterable[Evidence] = (),
    project_status: str | None = None,
) -> TrackedIssue:
    """An issue in neutral terms; a field of the wrong shape is read as absent."""
    number = issue_number(item)
    return TrackedIssue(
        number=number,
        task_id=task_id(repository, number),
        title=as_str(item.get("title")) or "",
        body=as_str(item.get("body")),
        native=NativeState(
            state=as_str(item.get("state")) or "open",
            state_reason=as_str(item.get("state_reason")),
            labels=label_names(item.get("labels")),
            extra={PROJECT_STATUS: project_status} if project_status is not None else {},
        ),
        assignees=tuple(
            login
            for user in as_list(item.get("assignees"))
            if (login := as_str(as_dict(user).get("login")))
        ),
        created_at=as_ms(item.get("created_at")),
        updated_at=as_ms(item.get("updated_at")),
        evidence=tuple(evidence),
        mark=mark_in(item.get("body")),
        milestone=as_str(as_dict(item.get("milestone")).get("title")),
        issue_type=as_str(as_dict(item.get("type")).get("name")),
        closed_at=as_ms(item.get("closed_at")) or None,
    )


def gone(repository: str, number: int, fate: str) -> TrackedIssue:
    """An issue the tracker answered for with "transferred" (301) or "deleted" (410)."""
    return TrackedIssue.vanished(number, task_id(repository, number), fate)


def mentioned_issues(repository: str, pull: Mapping[str, Any], most: int | None = None) -> set[int]:
    """The issue numbers of this repository a pull request's title or body mentions
    (``most``: read no further once more than that many are found)."""
    text = f"{as_str(pull.get('title')) or ''}\n{as_str(pull.get('body')) or ''}"
    number = as_int(pull.get("number")) or 0
    return mentioned_numbers(text, repository, exclude=number, most=most)
