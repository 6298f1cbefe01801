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

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from cotal_tasks.core import (
    BRIEF_BYTES,
    MAX_EVIDENCE,
    SOURCE_BYTES,
    TASK_VERSION,
    TITLE_BYTES,
    Seat,
    Task,
    TaskBinding,
    TaskEvidence,
    TaskStatus,
    TextRefused,
    check_task_text,
    lines_kept,
)
from cotal_tasks.core.models import MAX_SAFE_INT, NEEDS_BINDING
from cotal_tasks.core.text import controls_as_spaces
from cotal_tasks.providers.hosted.boundary import Reason, as_dict, as_list, as_str
from cotal_tasks.providers.hosted.config import StatusRule
from cotal_tasks.providers.hosted.scope import left_status
from cotal_tasks.providers.hosted.tracker import NativeState, TrackedIssue, evidence_entries

MAX_MS = MAX_SAFE_INT
WITHHELD = "confidential"  # the fate of an issue the operator did not opt in to mirror
# Who a binding read from the tracker was made by: the tracker's assignment, not a caller.
SYNC_BINDER = "tracker-sync"

UidLookup = Callable[[str, str], str | None]  # (owner, actor) -> current lifecycle uid
Note = Callable[[Reason, str], None]  # (reason, field): one degradation of the item at hand


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
        conditions = rule.native_conditions()
        if any(
            (held := native.extra.get(name)) is None or held.casefold() != wanted.casefold()
            for name, wanted in conditions.items()
        ):
            continue
        if rule.label is not None:
            return rule.status, labels[rule.label.casefold()]
        for name in conditions:
            if native.source is not None:
                break  # the tracker's own name says it (with the reason, if asked)
            return rule.status, native.extra[name]
        shown = native.source or native.state
        if rule.state_reasons and native.state_reason:
            return rule.status, f"{shown}/{native.state_reason}"
        return rule.status, shown
    return "open", native.source or native.state


_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_cut(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8 on a character boundary; a lone
    surrogate (``"\\ud83d"`` in a tracker's JSON) becomes U+FFFD first."""
    text = _SURROGATE.sub("\ufffd", text)
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", errors="ignore").rstrip() + "…"


def _no_note(reason: Reason, detail: str) -> None:
    return None


def clean_text(
    value: str | None,
    max_bytes: int,
    *,
    field: str,
    task: str,
    note: Note = _no_note,
    lines: bool = False,
) -> str | None:
    """A tracker value as TaskText: control characters become spaces (with ``lines``, a
    multi-line text keeps its line structure, through ``lines_kept``), an over-long value is
    cut at a safe boundary, and a value still refused (credential-shaped) is omitted; each
    loss goes to ``note`` (which logs and counts it), and no issue ever stops the sync."""
    if not isinstance(value, str):
        return None
    text = (lines_kept(value) if lines else controls_as_spaces(value)).strip()
    if not text:
        return None
    cut = safe_cut(text, max_bytes)
    if len(cut.encode("utf-8")) < len(text.encode("utf-8", errors="surrogatepass")):
        note("text-cut", field)
    try:
        return check_task_text(cut, max_bytes, field=field, task=task)
    except TextRefused:
        note("text-refused", field)
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
    """The record's evidence plus the tracker's, deduplicated, the newest MAX_EVIDENCE."""
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
    note: Note = _no_note,
) -> Task:
    """The task record an issue maps to, given the record already held for it.

    What the record refuses is left out and noted (a field, an evidence entry), never the
    task. An issue that left the project (``issue.gone``) is ``dropped`` with the fate as
    ``statusSource``; read only as gone, it keeps the rest of the existing record.
    """
    status, source = evaluate(rules, issue.native)
    binding = resolve_binding(
        issue.assignees, existing.binding if existing else None, seats, uid_of, now
    )
    if issue.gone is not None:
        status, source = "dropped", issue.gone
    elif issue.out_of_scope is not None:
        # Left the endpoint's scope (``hosted.scope``): a person's change; the seat that
        # held it stays named, so its next write is answered about this task. Finished
        # work stays finished: only what was not done becomes dropped.
        status, source = left_status(status), issue.out_of_scope
        binding = existing.binding if existing is not None else binding
    elif status in NEEDS_BINDING and binding is None:
        status = "open"  # the invariant: no seat is known to be working on it
    elif status == "open" and binding is not None:
        status = "claimed"  # a known seat is assigned: someone is working on it
    tid = issue.task_id

    def text(value: str | None, size: int, field: str, *, lines: bool = False) -> str | None:
        return clean_text(value, size, field=field, task=tid, note=note, lines=lines)

    title = text(issue.title, TITLE_BYTES, "title")
    brief = text(issue.body, BRIEF_BYTES, "brief", lines=True)
    updated = max(issue.updated_at, existing.updatedAt if existing else 0)
    if issue.gone is not None and not issue.title and existing is not None:
        title, brief, updated = existing.title, existing.brief, max(now, existing.updatedAt)
    # A withheld issue (confidential) keeps nothing it published before, evidence included.
    held_evidence = existing.evidence if existing and issue.gone != WITHHELD else ()
    found = evidence_entries(
        issue.evidence, lambda e: note("evidence-refused", f"{e.kind} at {e.at}")
    )
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": tid,
        "space": space,
        "title": title or f"(untitled {tid})",
        "brief": brief,
        "status": status,
        "statusSource": text(source, SOURCE_BYTES, "statusSource"),
        "binding": binding.model_dump() if binding is not None else None,
        "evidence": [e.model_dump() for e in merge_evidence(held_evidence, found)],
        "createdAt": _ms(issue.created_at or (existing.createdAt if existing else 0)),
        "updatedAt": _ms(updated),
    }
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        # A value slipped past the cleaning above: keep the task with the bare minimum.
        fields = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
        for name in fields:
            note("text-refused", name)
        data.update(brief=None, evidence=[], statusSource=None)
        return Task.model_validate(data)


def _ms(value: int) -> int:
    """An epoch-ms stamp within the record's bounds (a date before 1970 reads as 0)."""
    return min(max(value, 0), MAX_MS)


def same_record(a: Task, b: Task) -> bool:
    """True when two records say the same thing, ``updatedAt`` aside (an echo, not news)."""
    return a.model_dump(exclude={"updatedAt"}) == b.model_dump(exclude={"updatedAt"})


def label_names(value: Any) -> tuple[str, ...]:
    """Label names from a list of label objects (``{"name": …}``) or of names."""
    names = (
        as_str(as_dict(label).get("name") if isinstance(label, dict) else label)
        for label in as_list(value)
    )
    return tuple(name for name in names if name)
