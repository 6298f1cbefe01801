"""GitLab's assignee writes without clobbering people. Pure: no I/O.

GitLab's REST API sets assignees only as a whole list (``assignee_ids``); it has no
add-only form. So a write reads the issue right before it sends the list, and after it
reads the issue's newest system notes: GitLab records every assignee change as one
(``SystemNotes::IssuablesService#change_issuable_assignees``: "assigned to @a, @b and
@c and unassigned @d"). An assignee a person added after that read, which the list sent
then removed, is put back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_ms, as_str

# A GitLab username: letters, digits, ``_``, ``-``, ``.``; it never ends in ``.``.
_REFERENCE = re.compile(r"@([A-Za-z0-9_.\-]*[A-Za-z0-9_\-])")
_ALL_REMOVED = ("removed assignee", "removed all assignees")


def _names(text: str) -> set[str]:
    return set(_REFERENCE.findall(text))


def changes_in(body: str) -> tuple[set[str], set[str] | None] | None:
    """The (added, removed) usernames an assignee system note names; ``removed`` is
    ``None`` when every assignee was removed; ``None``: not an assignee note."""
    text = body.strip()
    if text.lower() in _ALL_REMOVED:
        return set(), None
    if text.startswith("assigned to "):
        rest = text[len("assigned to ") :]
        added, _, removed = rest.partition(" and unassigned ")
        added = added.split(" additionally to ", 1)[0]  # older releases: who stayed
        return _names(added), _names(removed)
    if text.startswith("unassigned "):
        return set(), _names(text[len("unassigned ") :])
    return None


def added_by_people(notes: Iterable[Any], since_ms: int, me: str) -> set[str]:
    """Who people other than ``me`` assigned after ``since_ms`` and did not unassign
    again, from the issue's notes (any order)."""
    changes: list[tuple[int, int, tuple[set[str], set[str] | None]]] = []
    for note in notes:
        if not isinstance(note, Mapping) or note.get("system") is not True:
            continue
        if as_str(as_dict(note.get("author")).get("username")) == me:
            continue
        at = as_ms(note.get("created_at"))
        body = as_str(note.get("body"))
        change = changes_in(body) if body is not None else None
        if at > since_ms and change is not None:
            changes.append((at, as_int(note.get("id")) or 0, change))
    held: dict[str, bool] = {}
    for _at, _id, (added, removed) in sorted(changes, key=lambda c: (c[0], c[1])):
        if removed is None:
            held = dict.fromkeys(held, False)
        else:
            held.update(dict.fromkeys(removed, False))
        held.update(dict.fromkeys(added, True))
    return {name for name, kept in held.items() if kept}


def lost(
    notes: Iterable[Any], since_ms: int, me: str, result: Mapping[str, Any], unassign: Iterable[str]
) -> list[str]:
    """Assignees a person added after ``since_ms`` that the issue (``result``, as the
    write answered it) no longer has and the write did not mean to remove."""
    held = {as_str(as_dict(u).get("username")) for u in result.get("assignees") or ()}
    meant = set(unassign)
    return sorted(
        n for n in added_by_people(notes, since_ms, me) if n not in held and n not in meant
    )
