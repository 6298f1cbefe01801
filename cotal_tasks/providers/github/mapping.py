"""GitHub's JSON in neutral terms. Pure: no I/O.

``taskId`` is ``owner/repo#number``: stable and readable. Pull requests come through the
issues list too; they are never tasks, but the issues they mention are worth a look for
evidence. Evidence comes from the timeline: a cross-referencing pull request is a
``review`` (its URL), a referencing or closing commit a ``commit`` (its SHA), and a pull
request's head branch a ``branch``.
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


def timeline_evidence(events: Iterable[Mapping[str, Any]]) -> tuple[list[Evidence], list[int]]:
    """Evidence from an issue's timeline, and the numbers of the pull requests it names
    (whose head branches are evidence too, one request each)."""
    found: list[Evidence] = []
    pulls: list[int] = []
    for event in events:
        kind = event.get("event")
        at = epoch_ms(event.get("created_at") or event.get("submitted_at"))
        if kind == "cross-referenced":
            issue = (event.get("source") or {}).get("issue") or {}
            if "pull_request" in issue:
                url = issue.get("html_url") or (issue.get("pull_request") or {}).get("html_url")
                if url:
                    found.append(Evidence("review", str(url), at))
                if issue.get("number"):
                    pulls.append(int(issue["number"]))
        elif kind in ("referenced", "closed", "merged") and event.get("commit_id"):
            found.append(Evidence("commit", str(event["commit_id"]), at))
    return found, pulls


def branch_evidence(pull: Mapping[str, Any]) -> Evidence | None:
    head = pull.get("head") or {}
    ref = head.get("ref")
    if not ref:
        return None
    return Evidence("branch", str(ref), epoch_ms(pull.get("created_at")))
