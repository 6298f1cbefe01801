"""Tracker issue → task record: the status rules, the seat directory, the invariant.

Pure. The status comes from the first matching rule, with the native value that decided
it as ``statusSource``. A binding comes only from the seat directory (tracker account →
seat principal) plus a lifecycle uid the provider really knows: the binding already on
the record (a claim or bind made through the endpoint), else the seat's presence. A
human assignee never produces a binding. Then the invariant has the last word: claimed
or blocked without a binding is ``open`` (the native name kept in ``statusSource``), and
``open`` with a binding is ``claimed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from cotal_tasks.core import (
    MAX_EVIDENCE,
    TASK_VERSION,
    Seat,
    Task,
    TaskBinding,
    TaskEvidence,
    TaskStatus,
    TextRefused,
    check_task_text,
)
from cotal_tasks.core.models import NEEDS_BINDING
from cotal_tasks.providers.hosted.config import StatusRule
from cotal_tasks.providers.hosted.tracker import NativeState, TrackedIssue, evidence_entries

log = logging.getLogger(__name__)

TITLE_BYTES, BRIEF_BYTES, SOURCE_BYTES = 200, 4096, 64
# Who a binding read from the tracker was made by: the tracker's assignment, not a caller.
SYNC_BINDER = "tracker-sync"

UidLookup = Callable[[str, str], str | None]  # (owner, actor) -> current lifecycle uid


def evaluate(rules: Sequence[StatusRule], native: NativeState) -> tuple[TaskStatus, str]:
    """The first matching rule's status and the native value that decided it."""
    labels = {label.casefold(): label for label in native.labels}
    for rule in rules:
        if rule.state is not None and rule.state != native.state:
            continue
        if rule.state_reasons:
            reason = native.state_reason or "none"
            if reason not in rule.state_reasons:
                continue
        if rule.label is not None and rule.label.casefold() not in labels:
            continue
        if rule.project_status is not None and (
            native.project_status is None
            or native.project_status.casefold() != rule.project_status.casefold()
        ):
            continue
        if rule.label is not None:
            return rule.status, labels[rule.label.casefold()]
        if rule.project_status is not None and native.project_status is not None:
            return rule.status, native.project_status
        if rule.state_reasons and native.state_reason:
            return rule.status, f"{native.state}/{native.state_reason}"
        return rule.status, native.state
    return "open", native.state


def safe_cut(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8 on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", errors="ignore").rstrip() + "…"


def clean_text(value: str | None, max_bytes: int, *, field: str, task: str) -> str | None:
    """A tracker value as TaskText: control characters become spaces, an over-long value is
    cut at a safe boundary, and a value still refused (credential-shaped) is omitted; each
    loss is logged so it is visible, and no issue ever stops the sync."""
    if value is None:
        return None
    text = "".join(" " if ch < " " or "\x7f" <= ch <= "\x9f" else ch for ch in value).strip()
    if not text:
        return None
    cut = safe_cut(text, max_bytes)
    if cut != text:
        log.warning("%s of %s is over %d bytes; kept its first part", field, task, max_bytes)
    try:
        return check_task_text(cut, max_bytes, field=field, task=task)
    except TextRefused as exc:
        log.warning("%s; the field is left out of the task", exc.message)
        return None


def resolve_binding(
    assignees: Sequence[str],
    existing: TaskBinding | None,
    seats: Mapping[str, str],
    uid_of: UidLookup,
    now: int,
) -> TaskBinding | None:
    """The binding the tracker's assignees support, keeping what the endpoint knows."""
    mapped = [seats[login] for login in assignees if login in seats]
    existing_principal = f"{existing.owner}.{existing.actor}" if existing is not None else None
    if existing is not None and existing_principal in mapped:
        return existing  # the seat bound through the endpoint is still assigned
    if existing is not None and existing_principal not in seats.values():
        return existing  # a seat with no tracker account: only the endpoint can unbind it
    for principal in mapped:
        owner, actor = principal.split(".", 1)
        uid = uid_of(owner, actor)
        if uid is not None:
            seat = Seat(owner, actor, uid)
            return TaskBinding(
                owner=seat.owner,
                actor=seat.actor,
                lifecycleUid=seat.lifecycleUid,
                boundAt=now,
                boundBy=SYNC_BINDER,
            )
    return None


def merge_evidence(
    existing: Sequence[TaskEvidence], found: Sequence[TaskEvidence]
) -> tuple[TaskEvidence, ...]:
    """The record's evidence plus what the tracker shows, deduplicated, the newest 32."""
    have = {(e.kind, e.ref): e for e in existing}
    for item in found:
        have.setdefault((item.kind, item.ref), item)
    return tuple(sorted(have.values(), key=lambda e: e.addedAt)[-MAX_EVIDENCE:])


def project(
    issue: TrackedIssue,
    *,
    space: str,
    rules: Sequence[StatusRule],
    seats: Mapping[str, str],
    existing: Task | None,
    uid_of: UidLookup,
    now: int,
) -> Task:
    """The task record an issue maps to, given the record already held for it."""
    status, source = evaluate(rules, issue.native)
    binding = resolve_binding(
        issue.assignees, existing.binding if existing else None, seats, uid_of, now
    )
    if status in NEEDS_BINDING and binding is None:
        status = "open"  # the invariant: no seat is known to be working on it
    elif status == "open" and binding is not None:
        status = "claimed"  # a known seat is assigned: someone is working on it
    title = clean_text(issue.title, TITLE_BYTES, field="title", task=issue.task_id)
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": issue.task_id,
        "space": space,
        "title": title or f"(untitled {issue.task_id})",
        "brief": clean_text(issue.body, BRIEF_BYTES, field="brief", task=issue.task_id),
        "status": status,
        "statusSource": clean_text(source, SOURCE_BYTES, field="statusSource", task=issue.task_id),
        "binding": binding.model_dump() if binding is not None else None,
        "evidence": [
            e.model_dump()
            for e in merge_evidence(
                existing.evidence if existing else (), evidence_entries(issue.evidence)
            )
        ],
        "createdAt": issue.created_at,
        "updatedAt": max(issue.updated_at, existing.updatedAt if existing else 0),
    }
    try:
        return Task.model_validate(data)
    except ValidationError:
        # A value slipped past the cleaning above: keep the task with the bare minimum.
        log.warning("issue %s does not map cleanly; kept with title and status only", issue.number)
        data.update(brief=None, evidence=[])
        return Task.model_validate(data)


def same_record(a: Task, b: Task) -> bool:
    """True when two records say the same thing, ``updatedAt`` aside (an echo, not news)."""
    return a.model_dump(exclude={"updatedAt"}) == b.model_dump(exclude={"updatedAt"})
