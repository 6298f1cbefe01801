"""Issue references in free text, for any tracker: ``#12``, ``group/project#12``, and the
issue's web address (GitHub ``https://github.com/o/r/issues/12``, GitLab
``https://gitlab.example.com/group/project/-/issues/12``)."""

from __future__ import annotations

import re

_MENTION = re.compile(r"(?:^|[^\w/#!])(?:(?P<path>[\w.-]+(?:/[\w.-]+)+))?#(?P<number>\d{1,9})\b")
_ADDRESS = re.compile(
    r"https?://[^\s/]+/(?P<path>[\w.-]+(?:/[\w.-]+)+?)/(?:-/)?issues/(?P<number>\d{1,9})\b"
)


def mentioned_numbers(text: str, own_path: str, *, exclude: int | None = None) -> set[int]:
    """The issue numbers of ``own_path`` that ``text`` mentions (other projects ignored)."""
    found = set()
    for pattern in (_MENTION, _ADDRESS):
        for match in pattern.finditer(text):
            path = match.group("path")
            if path is not None and path.lower() != own_path.lower():
                continue
            number = int(match.group("number"))
            if number != exclude:
                found.add(number)
    return found
