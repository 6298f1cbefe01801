"""tower-do rows ↔ task records, both ways. Pure.

Read: ``taskId`` is the key, ``title`` the subject, ``brief`` the description and
``statusSource`` the native status. ``completed`` is done; a row tower-do counts as
blocked (explicit, a ``blockedBy`` entry, or a dependency not completed) is blocked;
``in_progress`` is claimed; ``pending`` is open; a removed key is dropped. ``owner``
becomes a binding only through the seat directory, and the status-binding invariant
has the last word, as in the hosted mirrors.

Write: the record the command service decided becomes the row tower-do should hold:
open → pending, claimed → in_progress, blocked → blocked (the note as a ``blockedBy``
entry), done → completed, dropped → a removal; the binding's seat becomes ``owner``
through the same directory read backwards.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from cotal_tasks.core import (
    BRIEF_BYTES,
    SOURCE_BYTES,
    TASK_VERSION,
    TITLE_BYTES,
    Task,
    TaskBinding,
    TaskEvidence,
    TaskStatus,
    line_breaks,
)
from cotal_tasks.core.models import NEEDS_BINDING
from cotal_tasks.providers.hosted.mapping import (
    UidLookup,
    clean_text,
    merge_evidence,
    resolve_binding,
)
from cotal_tasks.providers.tower_do.fold import (
    LINE_BREAKS,
    MAX_BLOCKER_CHARS,
    Row,
    TowerStatus,
    is_blocked,
)

TO_NATIVE: dict[TaskStatus, TowerStatus] = {
    "open": "pending",
    "claimed": "in_progress",
    "blocked": "blocked",
    "done": "completed",
}
REMOVED = "removed"  # statusSource of a task whose key the board removed
EVIDENCE = re.compile(r"^evidence (commit|branch|run|review): (.+)$")


def read_status(row: Row, tasks: Mapping[str, Row]) -> TaskStatus:
    if row.status == "completed":
        return "done"
    if is_blocked(row, dict(tasks)):
        return "blocked"
    return "claimed" if row.status == "in_progress" else "open"


def evidence_in(notes: Mapping[str, tuple[int, str]]) -> list[TaskEvidence]:
    """Evidence the endpoint wrote into messages threaded under a task (``note_body``)."""
    found: list[TaskEvidence] = []
    for at, body in sorted(notes.values()):
        for line in body.split("\n"):
            match = EVIDENCE.match(line)
            if match is None:
                continue
            try:
                found.append(
                    TaskEvidence.model_validate({"kind": match[1], "ref": match[2], "addedAt": at})
                )
            except ValidationError:
                continue  # not a ref a record can hold: left on the board only
    return found


def note_body(note: str | None, evidence: Sequence[TaskEvidence]) -> str | None:
    """The body of the message a write's note and new evidence become."""
    lines = [line_breaks(note)] if note else []  # the note's lines as the board's own
    lines += [f"evidence {e.kind}: {e.ref}" for e in evidence]
    return "\n".join(lines) if lines else None


def project(
    row: Row,
    tasks: Mapping[str, Row],
    *,
    notes: Mapping[str, tuple[int, str]] | None = None,
    space: str,
    seats: Mapping[str, str],
    existing: Task | None,
    uid_of: UidLookup,
    now: int,
) -> Task:
    """The record a live row maps to, given the record already held for it."""
    status = read_status(row, tasks)
    owners = (row.owner,) if row.owner is not None else ()
    binding = resolve_binding(owners, existing.binding if existing else None, seats, uid_of, now)
    if status in NEEDS_BINDING and binding is None:
        status = "open"  # the invariant: no known seat is working on it
    elif status == "open" and binding is not None:
        status = "claimed"
    data: dict[str, Any] = {
        "version": TASK_VERSION,
        "taskId": row.key,
        "space": space,
        "title": clean_text(row.subject, TITLE_BYTES, field="title", task=row.key)
        or f"(untitled {row.key})",
        "brief": clean_text(row.description, BRIEF_BYTES, field="brief", task=row.key, lines=True),
        "status": status,
        "statusSource": clean_text(row.status, SOURCE_BYTES, field="statusSource", task=row.key),
        "binding": binding.model_dump() if binding is not None else None,
        "evidence": [
            e.model_dump()
            for e in merge_evidence(existing.evidence if existing else (), evidence_in(notes or {}))
        ],
        "createdAt": existing.createdAt if existing else row.updated_at,
        "updatedAt": max(row.updated_at, existing.updatedAt if existing else 0),
    }
    return Task.model_validate(data)


def dropped(existing: Task, now: int) -> Task:
    """A record whose key the board removed: dropped, its binding kept."""
    data = existing.model_dump()
    data.update(status="dropped", statusSource=REMOVED, updatedAt=max(now, existing.updatedAt))
    return Task.model_validate(data)


def identity_of(binding: TaskBinding | None, seats: Mapping[str, str]) -> str | None:
    """The tower-do identity the directory gives a bound seat, if any."""
    if binding is None:
        return None
    principal = f"{binding.owner}.{binding.actor}"
    for identity, mapped in seats.items():
        if mapped == principal:
            return identity
    return None


def blocker(note: str | None) -> str:
    """A note as a ``blockedBy`` entry: one line of at most 120 code points."""
    text = LINE_BREAKS.sub(" ", note or "").strip() or "blocked (set through Cotal)"
    return text if len(text) <= MAX_BLOCKER_CHARS else text[: MAX_BLOCKER_CHARS - 1] + "…"


def row_for(
    old: Task | None,
    new: Task,
    current: Row | None,
    *,
    seats: Mapping[str, str],
    note: str | None,
) -> Row | None:
    """The row tower-do should hold after ``new`` (``None``: remove the key)."""
    if new.status == "dropped":
        return None
    native = TO_NATIVE[new.status]
    base = current or Row(key=new.taskId, subject=new.title, status=native)
    owner = base.owner
    wanted = identity_of(new.binding, seats)
    before = identity_of(old.binding, seats) if old is not None else None
    if wanted is not None:
        owner = wanted
    elif before is not None and before == base.owner:
        owner = None  # the binding left a directory seat: its identity lets go
    blocked_by = base.blocked_by
    if new.status == "blocked":
        entry = blocker(note)
        if entry not in blocked_by:
            blocked_by = (*blocked_by, entry)
    else:
        blocked_by = ()  # any blocker left would keep the row blocked
    description = base.description
    if old is None or new.brief != old.brief:  # the board file keeps its own line breaks
        description = None if new.brief is None else line_breaks(new.brief)
    return replace(
        base,
        subject=new.title if old is None or new.title != old.title else base.subject,
        description=description,
        status=native,
        owner=owner,
        blocked_by=blocked_by,
        changed_files=base.changed_files if native == "completed" else (),
    )


_SLUG = re.compile(r"[^a-z0-9]+")


def new_key(title: str, taken: Mapping[str, object]) -> str:
    """A fresh task key: the title's first words as a slug, plus 6 random hex digits."""
    slug = _SLUG.sub("-", title.lower()).strip("-")[:32].strip("-") or "task"
    while True:
        key = f"{slug}-{secrets.token_hex(3)}"
        if key not in taken:
            return key
