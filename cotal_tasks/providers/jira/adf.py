"""Atlassian Document Format (ADF), the JSON Jira Cloud keeps rich text in: rendered to
plain text for a task's brief, and a plain text made into a document for a comment or
a description. Pure and bounded: a document deeper than ``MAX_DEPTH`` or larger than
``MAX_NODES`` is read only that far, and the text stops growing past ``max_chars``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 40
MAX_NODES = 20_000
_BLOCKS = frozenset(
    {"paragraph", "heading", "blockquote", "codeBlock", "panel", "rule", "table", "tableRow"}
)


class _Render:
    def __init__(self, max_chars: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.nodes = 0
        self.max_chars = max_chars

    def emit(self, text: str) -> None:
        if self.size < self.max_chars and text:
            self.parts.append(text)
            self.size += len(text)

    def full(self) -> bool:
        return self.size >= self.max_chars or self.nodes >= MAX_NODES

    def node(self, node: Any, depth: int, prefix: str = "") -> None:
        if not isinstance(node, Mapping) or depth > MAX_DEPTH or self.full():
            return
        self.nodes += 1
        kind = node.get("type")
        found = node.get("attrs")
        attrs: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if kind == "text":
            text = node.get("text")
            text = text if isinstance(text, str) else ""
            href = _link_of(node)
            self.emit(f"{text} ({href})" if href and href not in text else text)
            return
        if kind == "hardBreak":
            self.emit("\n")
            return
        if kind in ("mention", "emoji", "status", "date"):
            for key in ("text", "shortName", "timestamp"):
                if isinstance(attrs.get(key), str):
                    self.emit(attrs[key])
                    return
            return
        if kind in ("inlineCard", "blockCard", "embedCard"):
            url = attrs.get("url")
            self.emit(url if isinstance(url, str) else "")
            return
        if kind == "rule":
            self.emit("---\n\n")
            return
        if kind in ("mediaSingle", "mediaGroup", "media"):
            self.emit("[attachment]\n\n" if kind != "media" else "")
            return
        children = node.get("content")
        items = children if isinstance(children, list) else []
        if kind in ("bulletList", "orderedList"):
            for index, item in enumerate(items, start=1):
                mark = f"{index}. " if kind == "orderedList" else "- "
                self.emit(prefix + mark)
                self.node(item, depth + 1, prefix + "  ")
            if not prefix:
                self.emit("\n")
            return
        if kind == "tableRow":
            for index, cell in enumerate(items):
                if index:
                    self.emit(" | ")
                self._inline(cell, depth + 1)
            self.emit("\n")
            return
        for child in items:
            self.node(child, depth + 1, prefix)
        if kind in _BLOCKS or kind == "listItem":
            self._end_block(kind, nested=bool(prefix))

    def _inline(self, cell: Any, depth: int) -> None:
        """A table cell's text on one line."""
        sub = _Render(self.max_chars - self.size)
        sub.node(cell, depth)
        self.nodes += sub.nodes
        self.emit(" ".join("".join(sub.parts).split()))

    def _end_block(self, kind: Any, *, nested: bool) -> None:
        """A block ends its line; outside a list it is also followed by a blank line."""
        if not (self.parts and self.parts[-1].endswith("\n")):
            self.emit("\n")
        if kind not in ("listItem", "table") and not nested:
            self.emit("\n")


def _link_of(node: Mapping[str, Any]) -> str | None:
    """The URL of a text node's ``link`` mark, if it has one."""
    marks = node.get("marks")
    for mark in marks if isinstance(marks, list) else ():
        if isinstance(mark, Mapping) and mark.get("type") == "link":
            attrs = mark.get("attrs")
            href = attrs.get("href") if isinstance(attrs, Mapping) else None
            return href if isinstance(href, str) else None
    return None


def to_text(document: Any, max_chars: int = 16_384) -> str | None:
    """The plain text of an ADF document (or of a plain string, as API v2 answers);
    ``None`` for an empty or absent one."""
    if isinstance(document, str):
        return document or None
    if not isinstance(document, Mapping):
        return None
    render = _Render(max_chars)
    render.node(document, 0)
    lines = "".join(render.parts)[:max_chars].splitlines()
    text = "\n".join(line.rstrip() for line in lines).strip()
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text or None


def from_text(text: str) -> dict[str, Any]:
    """A plain text as an ADF document: a paragraph per blank-line-separated block, each
    line break a ``hardBreak``."""
    content: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        inline: list[dict[str, Any]] = []
        for index, line in enumerate(lines):
            if index:
                inline.append({"type": "hardBreak"})
            if line:
                inline.append({"type": "text", "text": line})
        if any(node["type"] == "text" for node in inline):
            content.append({"type": "paragraph", "content": inline})
    return {"type": "doc", "version": 1, "content": content}
