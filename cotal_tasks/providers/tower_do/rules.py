"""tower-do's write rules, applied to one row the way its ``writeBoardSnapshot`` applies
them to a full-replacement write that replays every other row unchanged. Pure.

- Ownership guard: a row with an ``owner`` may be changed or removed only by that owner
  or by ``tower``; comparison is exact. Stale-claim takeover: a non-completed row whose
  owner has been quiet on that task for 6 h (and has no fresh liveness record) may be
  adopted (``owner`` set to the caller, nothing else changed) or removed.
- Open-task budget: at most 50 non-completed rows after the write.
- Dependencies, over every row of the board the write produces (the written row's
  dependents included), as tower-do checks them: every ``dependsOn`` key must exist,
  ``in_progress`` and ``completed`` need every dependency completed, no cycles, and a
  removal may not strand a surviving dependent.
A refusal is ``WriteRefused`` naming which rule and the remedy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal

from cotal_tasks.providers.tower_do.fold import TOWER, Fold, Row, RowRefused, normalize

MAX_OPEN_TASKS = 50
TASK_CLAIM_STALE_MS = 6 * 60 * 60_000
LIVE_WINDOW_MS = 2 * 60_000

Rule = Literal["owner", "budget", "dependency", "row", "removed"]


class WriteRefused(Exception):
    """tower-do's rules refuse the write: ``rule`` says which, ``message`` what to do."""

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def stale_claims(
    fold: Fold, now: int, live: Iterable[str] | None, idle_ms: int = TASK_CLAIM_STALE_MS
) -> set[tuple[str, str]]:
    """tower-do's ``staleTaskClaims``: (owner, key) pairs whose claim may be displaced.

    ``live`` are identities with a fresh liveness record; ``None`` (the records could not
    be read) counts every owner as live, so no claim goes stale on missing data.
    """
    if not fold.activity or live is None:
        return set()
    alive = set(live)
    stale: set[tuple[str, str]] = set()
    for row in fold.tasks.values():
        if row.owner is None or row.status == "completed" or row.owner in alive:
            continue
        quiet_since = fold.activity.get((row.owner, row.key), row.updated_at)
        if now - quiet_since > idle_ms:
            stale.add((row.owner, row.key))
    return stale


def _guard(existing: Row, caller: str) -> bool:
    return existing.owner is None or caller in (existing.owner, TOWER)


def _hint(existing: Row, stale: set[tuple[str, str]]) -> str:
    if existing.status == "completed":
        return "; a completed task stays with its owner: only that owner or tower may change it"
    if existing.owner is not None and (existing.owner, existing.key) in stale:
        return "; its owner is idle past the 6 h takeover window: claim it, then change it"
    return f"; ask {existing.owner} on the tower-do board, or have the operator act as tower"


def plan_upsert(
    fold: Fold, row: Row, caller: str, stale: set[tuple[str, str]], now: int
) -> Row | None:
    """The row to append for ``row`` written by ``caller``, or ``None`` when nothing
    changes (tower-do appends no event then). Raises ``WriteRefused``."""
    try:
        candidate = replace(normalize(row), updated_at=now)
    except RowRefused as exc:
        raise WriteRefused("row", f"{exc}. Shorten or fix the value, then retry") from exc
    existing = fold.tasks.get(candidate.key)
    if existing is not None and existing.same_content(candidate):
        return None
    if existing is not None and not _guard(existing, caller):
        adopting = (
            (existing.owner, existing.key) in stale
            and existing.status != "completed"
            and candidate.owner == caller
            and replace(existing, owner=caller).same_content(candidate)
        )
        if not adopting:
            raise WriteRefused(
                "owner",
                f"task {candidate.key} is owned by {existing.owner!r} on the tower-do board, "
                f"and only its owner or tower may change it{_hint(existing, stale)}",
            )
    after = {**fold.tasks, candidate.key: candidate}
    _check_budget(after)
    _check_dependencies(after, candidate.key)
    return candidate


def upsert_events(
    fold: Fold, row: Row, caller: str, stale: set[tuple[str, str]], now: int
) -> list[dict[str, Any]]:
    """The events that write ``row``: one upsert, or none when nothing changes.

    A caller taking over a stale claim and changing the row too (a claim of a stalled
    ``pending`` row) gets two, as tower-do asks for two writes: the adoption (only
    ``owner`` changes), then the edit, which the adopter may now make."""
    existing = fold.tasks.get(row.key)
    try:
        planned = plan_upsert(fold, row, caller, stale, now)
    except WriteRefused as refused:
        if refused.rule != "owner" or existing is None or row.owner != caller:
            raise
        if existing.owner is None or (existing.owner, existing.key) not in stale:
            raise
        adopted = plan_upsert(fold, replace(existing, owner=caller), caller, stale, now)
        assert adopted is not None
        after = Fold(revision=fold.revision + 1, tasks={**fold.tasks, row.key: adopted})
        edited = plan_upsert(after, row, caller, set(), now)
        events = [upsert_event(adopted, caller, now)]
        return events + ([upsert_event(edited, caller, now)] if edited is not None else [])
    return [] if planned is None else [upsert_event(planned, caller, now)]


def check_not_removed(fold: Fold, key: str) -> None:
    """A write to a task whose row is gone from the board (an agent, or an earlier drop,
    removed it) does not bring the row back: tower-do keeps nothing of a removed row, so
    writing it again would undo that removal and lose the row's description and links."""
    if key not in fold.tasks:
        raise WriteRefused(
            "removed",
            f"task {key} was removed from the tower-do board, and the endpoint does not bring "
            "a removed row back. Create a new task for the work (create-task)",
        )


def plan_remove(fold: Fold, key: str, caller: str, stale: set[tuple[str, str]]) -> bool:
    """Whether a removal event is due (``False``: the key is already gone)."""
    existing = fold.tasks.get(key)
    if existing is None:
        return False
    if not _guard(existing, caller) and not (
        (existing.owner, key) in stale and existing.status != "completed"
    ):
        raise WriteRefused(
            "owner",
            f"task {key} is owned by {existing.owner!r} on the tower-do board, and only its "
            f"owner or tower may remove it{_hint(existing, stale)}",
        )
    after = {k: v for k, v in fold.tasks.items() if k != key}
    stranded = sorted(k for k, v in after.items() if key in v.depends_on)
    if stranded:
        raise WriteRefused(
            "dependency",
            f"cannot remove task {key}: {', '.join(stranded)} still depend(s) on it. "
            "Drop the dependency on the tower-do board first",
        )
    _check_dependencies(after, None)
    return True


def _check_budget(after: Mapping[str, Row]) -> None:
    """tower-do counts the board a write produces: over the budget is refused, even when
    the board was over it already (a release before the budget, or a race)."""
    open_after = sum(1 for row in after.values() if row.status != "completed")
    if open_after > MAX_OPEN_TASKS:
        raise WriteRefused(
            "budget",
            f"the tower-do board holds at most {MAX_OPEN_TASKS} open (non-completed) tasks "
            f"and this write would make {open_after}. Finish or drop an open task first",
        )


_WORD = {"pending": "open", "in_progress": "claimed", "blocked": "blocked", "completed": "done"}


def _check_dependencies(after: Mapping[str, Row], written: str | None) -> None:
    """tower-do's dependency rules over the whole board a write produces, as its
    ``writeBoardSnapshot`` checks every row it replays: each ``dependsOn`` key exists, an
    ``in_progress`` or ``completed`` row has every dependency completed, and no cycles.

    The written row is looked at first, then its dependents, then the rest, so the
    refusal names the row the caller can act on; which writes are refused is tower-do's
    set either way. A write that left a claimed or done row waiting on an unfinished one
    would make tower-do refuse every later write to the board, by any agent."""
    if written is not None:
        _check_own(after, written)
        row = after[written]
        if row.status != "completed":
            waiting = sorted(
                key
                for key, other in after.items()
                if written in other.depends_on and other.status in ("in_progress", "completed")
            )
            if waiting:
                raise WriteRefused(
                    "dependency",
                    f"task {written} cannot be {_WORD[row.status]} while "
                    f"{', '.join(f'{k} ({_WORD[after[k].status]})' for k in waiting)} "
                    f"depend(s) on it, and tower-do refuses every later write to a board "
                    f"where a claimed or done task waits on an unfinished one. Move those "
                    f"back first (administer-task), or drop their dependsOn on {written} "
                    "on the tower-do board",
                )
    for key in after:
        if key != written:
            _check_own(after, key, already=True)
    _check_acyclic(after)


def _check_own(after: Mapping[str, Row], key: str, *, already: bool = False) -> None:
    """One row's own dependencies; ``already``: a row this write does not change, whose
    fault the board already holds (tower-do refuses every write until it is fixed)."""
    row = after[key]
    board = (
        "the tower-do board already holds a broken row, and tower-do refuses every write "
        "until it is fixed: "
        if already
        else ""
    )
    missing = [dep for dep in row.depends_on if dep not in after]
    if missing:
        raise WriteRefused(
            "dependency",
            f"{board}task {key} depends on {', '.join(missing)}, which the board does not "
            "hold. Fix its dependsOn on the tower-do board",
        )
    if row.status in ("in_progress", "completed"):
        open_deps = [dep for dep in row.depends_on if after[dep].status != "completed"]
        if open_deps:
            raise WriteRefused(
                "dependency",
                f"{board}task {key} cannot be {_WORD[row.status]} while its dependencies "
                f"are not completed ({', '.join(open_deps)}). Finish those first, or mark "
                "it blocked",
            )


def _check_acyclic(after: Mapping[str, Row]) -> None:
    visiting: set[str] = set()
    visited: set[str] = set()

    def visit(key: str) -> None:
        if key in visiting:
            raise WriteRefused("dependency", f"dependency cycle at {key}. Break it first")
        if key in visited or key not in after:
            return
        visiting.add(key)
        for dep in after[key].depends_on:
            visit(dep)
        visiting.discard(key)
        visited.add(key)

    for key in after:
        visit(key)


def upsert_event(row: Row, by: str, at: int) -> dict[str, Any]:
    return {
        "kind": "task",
        "op": "upsert",
        "key": row.key,
        "task": row.to_json(),
        "by": by,
        "at": at,
    }


def remove_event(key: str, by: str, at: int) -> dict[str, Any]:
    return {"kind": "task", "op": "remove", "key": key, "by": by, "at": at}


def note_event(
    fold: Fold, key: str, by: str, at: int, message_id: str, subject: str, body: str
) -> dict[str, Any]:
    """A broadcast threaded under ``key``: where tower-do keeps notes and evidence.

    Its audience is the board's owners at send time minus the sender, as tower-do's own
    broadcasts record it."""
    audience = sorted({row.owner for row in fold.tasks.values() if row.owner} - {by})
    message = {
        "id": message_id,
        "to": "all",
        "from": by,
        "subject": subject,
        "body": body,
        "at": at,
        "taskKey": key,
        "audience": audience,
    }
    return {"kind": "message", "message": message, "by": by, "at": at}
