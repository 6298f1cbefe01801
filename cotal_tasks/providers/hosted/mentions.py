"""Issue references in free text, for any tracker: ``#12``, ``group/project#12``, the
issue's web address (GitHub ``https://github.com/o/r/issues/12``, GitLab
``https://gitlab.example.com/group/project/-/issues/12`` or its work-item form
``…/-/work_items/12``), and GitHub's ``GH-12`` autolink to an issue of the same
repository (``autolinks``; GitLab has no such form)."""

from __future__ import annotations

import re

_MENTION = re.compile(r"(?:^|[^\w/#!])(?:(?P<path>[\w.-]+(?:/[\w.-]+)+))?#(?P<number>\d{1,9})\b")
_ADDRESS = re.compile(
    r"https?://[^\s/]+/(?P<path>[\w.-]+(?:/[\w.-]+)+?)/(?:-/)?(?:issues|work_items)/"
    r"(?P<number>\d{1,9})\b"
)
_AUTOLINK = re.compile(r"(?:^|[^\w/-])GH-(?P<number>\d{1,9})\b")


def mentioned_numbers(
    text: str,
    own_path: str,
    *,
    exclude: int | None = None,
    autolinks: bool = True,
    most: int | None = None,
) -> set[int]:
    """The issue numbers of ``own_path`` that ``text`` mentions (other projects ignored);
    ``autolinks``: ``GH-12`` counts too (GitHub's own form). ``most``: the reading stops
    once more than that many are found (a webhook that names more than it refreshes
    wakes one poll instead, so the rest need not be read: ``most`` + 1 numbers say so)."""
    found: set[int] = set()
    patterns = (_MENTION, _ADDRESS, _AUTOLINK) if autolinks else (_MENTION, _ADDRESS)
    for pattern in patterns:
        for match in pattern.finditer(text):
            path = match.groupdict().get("path")
            if path is not None and path.lower() != own_path.lower():
                continue
            number = int(match.group("number"))
            if number != exclude:
                found.add(number)
                if most is not None and len(found) > most:
                    return found
    return found
