"""Linear's JSON in neutral terms. Pure: no I/O.

An issue ``ENG-123`` is the task ``ENG-123``: its identifier, as Linear shows it. Task ids
of several teams share one endpoint, so the issue's number inside the bridge packs its
team's key with Linear's per-team number (``number_of``; ``identifier_of`` reads it
back), which no configuration change can reorder.

A task id is stable for the task's life (the contract), and Linear gives an issue a new
identifier when it moves to another team (``ENG-12`` to ``OPS-40``, the old ones kept in
``previousIdentifiers``, oldest first; Linear still answers for an old one). So the task
an issue maps to is the *first* identifier of its history that is in one of the
endpoint's teams (``task_identifier``): an issue moved between two teams of the endpoint
stays the task it was, and one that leaves for another team and comes back is that task
again. An issue that moved to a team outside the endpoint is read for its task all the
same, its team in ``extra`` (``config.TEAM``): it has left the scope (``hosted.scope``).

Its native state is ``closed`` when the workflow state's type is completed, canceled
or duplicate and ``open`` otherwise; the rules read the type (``extra["type"]``), the
state's name (``extra["state"]``) and the labels, and ``statusSource`` is the state's
name (``"Done (archived)"`` once Linear archived it). An issue in the trash is gone
(``trashed``). The assignee and the delegate (the agent an issue is delegated to while a
person stays assigned) are both accounts the seat directory may map. Evidence comes from
the issue's attachments: Linear's GitHub and GitLab integrations attach pull and merge
requests and commits (``hosted.links``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_ms, as_str, at_path
from cotal_tasks.providers.hosted.links import url_evidence
from cotal_tasks.providers.hosted.mapping import label_names
from cotal_tasks.providers.hosted.tracker import Evidence, NativeState, TrackedIssue
from cotal_tasks.providers.hosted.writeback import mark_in
from cotal_tasks.providers.linear.config import (
    CLOSED_TYPES,
    CYCLE,
    CYCLE_ACTIVE,
    NOW,
    PROJECT,
    PROJECT_ID,
    STATE,
    TEAM,
    TYPE,
)

# A claim mark among the labels the write plan compares: the issue stands in a started
# state. Never a Linear label (write-back never sends it).
STARTED = "\x00started"
STATE_TYPES = frozenset({"triage", "backlog", "unstarted", "started", *CLOSED_TYPES})
TRASHED = "trashed"

_IDENTIFIER = re.compile(r"^([A-Z][A-Z0-9]{0,5})-([1-9][0-9]{0,8})$")
_BASE = 37  # a key's characters are 1..36 in this base, so no two keys pack alike
_PER_TEAM = 10**9  # Linear's per-team numbers stay below this


def _code(key: str) -> int:
    code = 0
    for char in key:
        code = code * _BASE + (int(char, 36) + 1)
    return code


def split(identifier: Any) -> tuple[str, int] | None:
    """``("ENG", 123)`` from ``"ENG-123"``; ``None`` for anything else."""
    match = _IDENTIFIER.match(identifier) if isinstance(identifier, str) else None
    return None if match is None else (match.group(1), int(match.group(2)))


def number_of(identifier: Any) -> int | None:
    """The number the bridge keeps an issue under: its team's key and Linear's number."""
    parsed = split(identifier)
    return None if parsed is None else _code(parsed[0]) * _PER_TEAM + parsed[1]


def identifier_of(number: int) -> str:
    """``ENG-123`` back from ``number_of``."""
    code, n = divmod(number, _PER_TEAM)
    chars: list[str] = []
    while code:
        code, digit = divmod(code, _BASE)
        chars.append("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[digit - 1])
    return f"{''.join(reversed(chars))}-{n}"


def history(issue: Mapping[str, Any]) -> list[str]:
    """The identifiers the issue has had, oldest first, the one it has now last."""
    now = as_str(issue.get("identifier"))
    earlier = [x for x in as_list(issue.get("previousIdentifiers")) if isinstance(x, str)]
    return [x for x in [*earlier, now] if x and split(x) is not None]


def task_identifier(issue: Mapping[str, Any], teams: Sequence[str]) -> str | None:
    """The task an issue is: the first identifier of its history in one of ``teams``
    (the endpoint's); ``None``: it was never in any of them."""
    return next((x for x in history(issue) if (parsed := split(x)) and parsed[0] in teams), None)


def native_of(issue: Mapping[str, Any]) -> NativeState:
    state = as_dict(issue.get("state"))
    kind = as_str(state.get("type"))
    kind = kind if kind in STATE_TYPES else "unstarted"
    name = as_str(state.get("name")) or kind
    labels = label_names(at_path(issue, "labels", "nodes"))
    if kind == "started":
        labels += (STARTED,)
    shown = f"{name} (archived)" if as_str(issue.get("archivedAt")) else name
    extra = {TYPE: kind, STATE: name}
    now = split(issue.get("identifier"))
    facts = {
        TEAM: now[0] if now else None,
        NOW: as_str(issue.get("identifier")),
        PROJECT: as_str(at_path(issue, "project", "name")),
        PROJECT_ID: as_str(at_path(issue, "project", "id")),
        CYCLE: _number(at_path(issue, "cycle", "number")),
        CYCLE_ACTIVE: "true" if at_path(issue, "cycle", "isActive") is True else None,
    }
    extra |= {key: value for key, value in facts.items() if value is not None}
    return NativeState(
        state="closed" if kind in CLOSED_TYPES else "open",
        state_reason=kind,
        labels=labels,
        extra=extra,
        source=shown,
    )


def _number(value: Any) -> str | None:
    return str(int(value)) if isinstance(value, (int, float)) and value == int(value) else None


def accounts(issue: Mapping[str, Any]) -> tuple[str, ...]:
    """The assignee's and the delegate's user ids (either may be a seat's)."""
    found = (as_str(at_path(issue, key, "id")) for key in ("assignee", "delegate"))
    return tuple(dict.fromkeys(account for account in found if account))


def attachment_evidence(issue: Mapping[str, Any]) -> list[Evidence]:
    found: list[Evidence] = []
    for node in as_list(at_path(issue, "attachments", "nodes")):
        node = as_dict(node)
        at = as_ms(node.get("updatedAt")) or as_ms(node.get("createdAt"))
        found += url_evidence(as_str(node.get("url")), at)
    return found


def tracked(
    issue: Mapping[str, Any], teams: Sequence[str], asked: int | None = None
) -> TrackedIssue:
    """An issue node in neutral terms, as the task ``task_identifier`` names over
    ``teams`` (the endpoint's); a field of the wrong shape is read as absent.

    ``asked`` is the number a one-issue read asked for: an issue that moved to a team
    outside the endpoint is still that task (its team in ``extra`` says it left). An
    issue never in the endpoint's teams, asked for by no one, is not one of its issues
    (``ValueError``)."""
    if split(issue.get("identifier")) is None:
        raise ValueError("the item has no issue identifier")
    task = task_identifier(issue, teams)
    number = number_of(task) if task is not None else asked
    if number is None:
        raise ValueError("the item is an issue of another team")
    description = as_str(issue.get("description"))
    return TrackedIssue(
        number=number,
        task_id=identifier_of(number),
        title=as_str(issue.get("title")) or "",
        body=description,
        native=native_of(issue),
        assignees=accounts(issue),
        created_at=as_ms(issue.get("createdAt")),
        updated_at=as_ms(issue.get("updatedAt")),
        evidence=tuple(attachment_evidence(issue)),
        gone=TRASHED if issue.get("trashed") is True else None,
        mark=mark_in(description),
        closed_at=as_ms(issue.get("completedAt")) or as_ms(issue.get("canceledAt")) or None,
    )


def comment_marks(comments: Sequence[Any]) -> set[str]:
    return {mark for c in comments if (mark := mark_in(as_dict(c).get("body")))}
