"""The tower-do board log folded as tower-do folds it. Pure: lines in, a view out.

One JSON event per line. ``{"kind":"task","op":"upsert","key":…,"task":{…},"by":…,"at":…}``
replaces the row under its key (last writer wins), ``"op":"remove"`` deletes it; only
task events count toward ``revision``. Messages and findings are events too, never tasks.
An optional first line ``{"kind":"compact","revision":R,"snapshotLines":N,…}`` opens a
compacted log: it sets the revision, and the N snapshot lines after it rebuild the rows
without counting. A line that is not JSON, or not a valid event, is skipped and counted.
A row is admitted only when it passes tower-do's own row validation (``readPersistedTask``):
key grammar, single-line subject of at most 160 code points, and so on.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

TowerStatus = Literal["pending", "in_progress", "completed", "blocked"]
STATUSES: frozenset[str] = frozenset({"pending", "in_progress", "completed", "blocked"})
KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]")
TOWER = "tower"  # the orchestrator identity that may change any owned task
MAX_SUBJECT, MAX_DESCRIPTION, MAX_IDENTITY = 160, 2000, 64
MAX_DEPENDENCIES, MAX_BLOCKERS, MAX_BLOCKER_CHARS = 20, 20, 120
MAX_SCOPE, MAX_CHANGED_FILES, MAX_PATH_CHARS = 20, 100, 256
FINDING_KINDS = frozenset({"bug", "improve", "vuln", "idea"})
FINDING_SEVERITIES = frozenset({"low", "medium", "high"})
FINDING_STATUSES = frozenset({"open", "accepted", "snoozed", "rejected", "done"})


class RowRefused(ValueError):
    """A row tower-do would not hold; the message names the field and the limit."""


@dataclass(frozen=True, slots=True)
class Row:
    """One task row as tower-do stores it."""

    key: str
    subject: str
    status: TowerStatus
    description: str | None = None
    owner: str | None = None
    depends_on: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    changed_files: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = ()
    updated_at: int = 0

    def to_json(self) -> dict[str, Any]:
        """The row in tower-do's own field order (what its writer serializes)."""
        data: dict[str, Any] = {"key": self.key, "subject": self.subject, "status": self.status}
        if self.description is not None:
            data["description"] = self.description
        if self.owner is not None:
            data["owner"] = self.owner
        data["dependsOn"] = list(self.depends_on)
        if self.scope:
            data["scope"] = list(self.scope)
        if self.changed_files:
            data["changedFiles"] = list(self.changed_files)
        data["blockedBy"] = list(self.blocked_by)
        data["updatedAt"] = self.updated_at
        return data

    def same_content(self, other: Row) -> bool:
        """tower-do's ``taskEquals``: every field but ``updatedAt``."""
        return (
            self.subject,
            self.status,
            self.description,
            self.owner,
            self.depends_on,
            self.scope,
            self.changed_files,
            self.blocked_by,
        ) == (
            other.subject,
            other.status,
            other.description,
            other.owner,
            other.depends_on,
            other.scope,
            other.changed_files,
            other.blocked_by,
        )


def text_length(value: str) -> int:
    """Length in code points, tower-do's measure."""
    return len(value)


def _single_line(value: str, where: str) -> str:
    if LINE_BREAKS.search(value):
        raise RowRefused(f"{where} must be a single line")
    return value


def check_identity(value: str, where: str) -> str:
    identity = value.strip()
    if not identity:
        raise RowRefused(f"{where} is required")
    _single_line(identity, where)
    if "\x00" in identity:
        raise RowRefused(f"{where} must not contain a NUL character")
    if text_length(identity) > MAX_IDENTITY:
        raise RowRefused(f"{where} is {text_length(identity)} characters (max {MAX_IDENTITY})")
    if identity == "all":
        raise RowRefused(f'{where} must not be the reserved broadcast recipient "all"')
    return identity


def _entries(values: tuple[str, ...], where: str, *, single_line: bool) -> tuple[str, ...]:
    cleaned: list[str] = []
    for value in values:
        entry = value.strip()
        if single_line:
            _single_line(entry, where)
        if entry and entry not in cleaned:
            cleaned.append(entry)
    return tuple(cleaned)


def normalize(row: Row) -> Row:
    """The row as tower-do's ``normalizeTask`` admits it, or ``RowRefused``."""
    key = row.key.strip()
    if not KEY.match(key):
        raise RowRefused(f"task key {key!r} must be 1-40 lowercase ASCII letters, digits, . _ -")
    subject = _single_line(row.subject.strip(), f"subject of {key}")
    if not subject:
        raise RowRefused(f"subject of {key} is required")
    if text_length(subject) > MAX_SUBJECT:
        raise RowRefused(
            f"subject of {key} is {text_length(subject)} characters (max {MAX_SUBJECT})"
        )
    description = (row.description or "").strip() or None
    if description is not None and text_length(description) > MAX_DESCRIPTION:
        raise RowRefused(
            f"description of {key} is {text_length(description)} characters (max {MAX_DESCRIPTION})"
        )
    if row.status not in STATUSES:
        raise RowRefused(f"status of {key} is invalid: {row.status}")
    depends = _entries(row.depends_on, f"dependsOn of {key}", single_line=False)
    for dependency in depends:
        if not KEY.match(dependency):
            raise RowRefused(f"dependsOn of {key} names {dependency!r}, which is not a task key")
    if len(depends) > MAX_DEPENDENCIES:
        raise RowRefused(f"dependsOn of {key} supports at most {MAX_DEPENDENCIES} keys")
    if key in depends:
        raise RowRefused(f"{key} cannot depend on itself")
    scope = _entries(row.scope, f"scope of {key}", single_line=True)
    files = _entries(row.changed_files, f"changedFiles of {key}", single_line=True)
    for entry in (*scope, *files):
        if text_length(entry) > MAX_PATH_CHARS:
            raise RowRefused(f"a path of {key} is over {MAX_PATH_CHARS} characters")
    if len(scope) > MAX_SCOPE or len(files) > MAX_CHANGED_FILES:
        raise RowRefused(f"scope or changedFiles of {key} is over its limit")
    if files and row.status != "completed":
        raise RowRefused(f"changedFiles of {key} is a delivery receipt: it needs completed")
    blockers = _entries(row.blocked_by, f"blockedBy of {key}", single_line=True)
    if len(blockers) > MAX_BLOCKERS:
        raise RowRefused(f"blockedBy of {key} supports at most {MAX_BLOCKERS} entries")
    for entry in blockers:
        if text_length(entry) > MAX_BLOCKER_CHARS:
            raise RowRefused(
                f"a blockedBy entry of {key} is {text_length(entry)} characters "
                f"(max {MAX_BLOCKER_CHARS})"
            )
    owner = (row.owner or "").strip() or None
    if owner is not None:
        check_identity(owner, f"owner of {key}")
    return Row(
        key,
        subject,
        row.status,
        description,
        owner,
        depends,
        scope,
        files,
        blockers,
        row.updated_at,
    )


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def read_row(candidate: Any, at: int) -> Row | None:
    """A persisted row (``readPersistedTask``), or ``None`` when tower-do would skip it."""
    if not isinstance(candidate, dict):
        return None
    key, subject, status = candidate.get("key"), candidate.get("subject"), candidate.get("status")
    if not (isinstance(key, str) and isinstance(subject, str) and isinstance(status, str)):
        return None
    description = candidate.get("description")
    owner = candidate.get("owner")
    stamp = candidate.get("updatedAt")
    try:
        return normalize(
            Row(
                key,
                subject,
                status,  # type: ignore[arg-type]  # checked by normalize
                description if isinstance(description, str) and description else None,
                owner if isinstance(owner, str) and owner else None,
                _strings(candidate.get("dependsOn")),
                _strings(candidate.get("scope")),
                _strings(candidate.get("changedFiles")),
                _strings(candidate.get("blockedBy")),
                stamp if (stamp := _epoch(stamp)) is not None else at,
            )
        )
    except RowRefused:
        return None


def _epoch(value: Any) -> int | None:
    """A finite epoch-ms number as an int, else ``None`` (tower-do's ``isEpochMs``)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return int(value)
    return None


def _message_ok(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and all(
            isinstance(message.get(name), str) for name in ("id", "to", "from", "subject", "body")
        )
        and _epoch(message.get("at")) is not None
    )


def _finding_ok(finding: Any) -> bool:
    if not isinstance(finding, dict) or _epoch(finding.get("at")) is None:
        return False
    names = ("id", "kind", "title", "severity", "status", "summary", "from")
    return (
        all(isinstance(finding.get(name), str) for name in names)
        and finding["kind"] in FINDING_KINDS
        and finding["severity"] in FINDING_SEVERITIES
        and finding["status"] in FINDING_STATUSES
    )


@dataclass
class Fold:
    """The board folded so far; feed it complete lines in file order."""

    revision: int = 0
    skipped: int = 0
    tasks: dict[str, Row] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)  # keys whose last event removed them
    # (owner/by, task key) -> the last time that identity wrote an event for that task.
    activity: dict[tuple[str, str], int] = field(default_factory=dict)
    # task key -> {message id: (at, body)}: messages threaded under a task, last wins by id
    notes: dict[str, dict[str, tuple[int, str]]] = field(default_factory=dict)
    lines: int = 0  # non-empty lines seen
    snapshot_left: int = 0

    def feed(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        self.lines += 1
        try:
            event = json.loads(text)
        except ValueError:
            self.skipped += 1
            return
        if self.lines == 1 and _is_header(event):
            self.revision = int(event["revision"])
            self.snapshot_left = int(event["snapshotLines"])
            return
        counts = self.snapshot_left == 0
        if self.snapshot_left:
            self.snapshot_left -= 1
        if not isinstance(event, dict):
            self.skipped += 1
            return
        kind = event.get("kind")
        if kind == "task":
            self._task(event, counts)
        elif kind == "message" and _message_ok(event.get("message")):
            self._message(event["message"])
        elif not (kind == "finding" and _finding_ok(event.get("finding"))):
            self.skipped += 1

    def _message(self, message: dict[str, Any]) -> None:
        """A message is no task; one threaded under a task is kept as that task's note."""
        key = message.get("taskKey")
        if isinstance(key, str):
            at = _epoch(message["at"]) or 0
            self.notes.setdefault(key, {})[message["id"]] = (at, message["body"])

    def _task(self, event: dict[str, Any], counts: bool) -> None:
        op, key, at = event.get("op"), event.get("key"), _epoch(event.get("at"))
        if op not in ("upsert", "remove") or at is None:
            self.skipped += 1
            return
        by = event.get("by")
        if isinstance(by, str) and isinstance(key, str) and at > self.activity.get((by, key), -1):
            self.activity[(by, key)] = at
        if not isinstance(key, str):
            self.skipped += 1
            return
        if op == "remove":
            self.tasks.pop(key, None)
            self.removed.add(key)
            self.revision += 1 if counts else 0
            return
        row = read_row(event.get("task"), at)
        if row is None:
            self.skipped += 1
            return
        self.revision += 1 if counts else 0
        if row.key != key:
            row = Row(key, *_fields_after_key(row))
        self.tasks[key] = row
        self.removed.discard(key)


def _fields_after_key(row: Row) -> tuple[Any, ...]:
    return (
        row.subject,
        row.status,
        row.description,
        row.owner,
        row.depends_on,
        row.scope,
        row.changed_files,
        row.blocked_by,
        row.updated_at,
    )


def _is_header(event: Any) -> bool:
    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    return (
        isinstance(event, dict)
        and event.get("kind") == "compact"
        and count(event.get("revision"))
        and count(event.get("snapshotLines"))
    )


def fold_text(text: str) -> Fold:
    """Fold a whole log (what tower-do's ``fold()`` does on every read)."""
    fold = Fold()
    for line in text.split("\n"):
        fold.feed(line)
    return fold


def is_blocked(row: Row, tasks: dict[str, Row]) -> bool:
    """tower-do's ``taskIsBlocked``: explicit, a blocker, or a dependency not completed."""
    if row.status == "completed":
        return False
    if row.status == "blocked" or row.blocked_by:
        return True
    return any(
        (dep := tasks.get(key)) is None or dep.status != "completed" for key in row.depends_on
    )
