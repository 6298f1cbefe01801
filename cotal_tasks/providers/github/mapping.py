"""GitHub's JSON in neutral terms. Pure: no I/O.

``taskId`` is ``owner/repo#number``: stable and readable. Pull requests come through the
issues list too; they are never tasks, but the issues they mention are worth a look for
evidence (read in ``evidence``).
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


def task_id(repository: str, number: int) -> str:
    return f"{repository}#{number}"


def number_of(repository: str, task: str) -> int | None:
    return number_in(repository, task)


def is_pull_request(item: Mapping[str, Any]) -> bool:
    return "pull_request" in item


def tracked(
    repository: str,
    item: Mapping[str, Any],
    evidence: Iterable[Evidence] = (),
    project_status: str | None = None,
) -> TrackedIssue:
    number = int(item["number"])
    return TrackedIssue(
        number=number,
        task_id=task_id(repository, number),
        title=str(item.get("title") or ""),
        body=item.get("body"),
        native=NativeState(
            state=str(item.get("state") or "open"),
            state_reason=item.get("state_reason"),
            labels=tuple(
                str(label["name"] if isinstance(label, dict) else label)
                for label in item.get("labels") or ()
            ),
            project_status=project_status,
        ),
        assignees=tuple(
            str(user["login"]) for user in item.get("assignees") or () if user.get("login")
        ),
        created_at=epoch_ms(item.get("created_at")),
        updated_at=epoch_ms(item.get("updated_at")),
        evidence=tuple(evidence),
    )


def mentioned_issues(repository: str, pull: Mapping[str, Any]) -> set[int]:
    """The issue numbers of this repository a pull request's title or body mentions."""
    text = f"{pull.get('title') or ''}\n{pull.get('body') or ''}"
    return mentioned_numbers(text, repository, exclude=int(pull.get("number") or 0))
