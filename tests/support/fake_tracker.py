"""What both fake trackers share: the request log entry and a scripted failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

Hook = Callable[[str, str, dict[str, str]], None]  # (method, path, query) before an answer


@dataclass(frozen=True)
class RecordedRequest:
    """One request a fake answered (every one, including 401s, 304s and scripted faults).

    ``path`` is the raw path as sent (GitLab's project paths stay URL-encoded)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names, only the fake's LOGGED_HEADERS
    status: int
    body: Any = None  # the parsed body of a write (JSON, or GitLab form data), else None

    @property
    def if_none_match(self) -> str | None:
        return self.headers.get("if-none-match")

    @property
    def is_write(self) -> bool:
        """A request that changes state (a GraphQL query is a POST, but reads)."""
        return self.method in ("POST", "PATCH", "PUT", "DELETE") and not self.path.endswith(
            "/graphql"
        )

    def matches(
        self, method: str | None = None, path: str | None = None, status: int | None = None
    ) -> bool:
        """``path`` is a glob over the whole path (``*`` also crosses ``/``)."""
        return (
            (method is None or self.method == method.upper())
            and (path is None or fnmatchcase(self.path, path))
            and (status is None or self.status == status)
        )


@dataclass
class ScriptedFailure:
    status: int
    retry_after: int | None
    message: str | None
    method: str | None
    path: str | None

    def applies(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or fnmatchcase(path, self.path)
        )


@dataclass
class ScriptedStall:
    seconds: float
    method: str | None
    path: str | None

    def applies(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or fnmatchcase(path, self.path)
        )


def unmarked(value: Any) -> Any:
    """``value`` (a text, or a request body) without the write marks the bridge appends
    to what it creates on a tracker (hidden comments naming the write)."""
    from cotal_tasks.providers.hosted.writeback import strip_marker

    if isinstance(value, str):
        return strip_marker(value)
    if isinstance(value, dict):  # a text that was only a mark was not sent at all
        return {k: unmarked(v) for k, v in value.items() if unmarked(v) is not None}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def before_nth_get(path: str, nth: int, action: Callable[[], None]) -> Hook:
    """A ``before_answer`` hook that runs ``action`` once, just before the ``nth`` GET of
    ``path`` is answered: "between two page requests" of a listing."""
    seen: list[str] = []

    def hook(method: str, requested: str, query: dict[str, str]) -> None:
        if method == "GET" and requested == path:
            seen.append(requested)
            if len(seen) == nth:
                action()

    return hook
