"""Issue references in free text (``#12``, ``group/project#12``), for any tracker."""

from __future__ import annotations

import re

_MENTION = re.compile(r"(?:^|[^\w/#!])(?:(?P<path>[\w.-]+(?:/[\w.-]+)+))?#(?P<number>\d{1,9})\b")


def mentioned_numbers(text: str, own_path: str, *, exclude: int | None = None) -> set[int]:
    """The issue numbers of ``own_path`` that ``text`` mentions (other projects ignored)."""
    found = set()
    for match in _MENTION.finditer(text):
        path = match.group("path")
        if path is not None and path.lower() != own_path.lower():
            continue
        number = int(match.group("number"))
        if number != exclude:
            found.add(number)
    return found
