"""What both fake trackers share: the request log and its entries, scripted failures,
stalls and write refusals (``FakeTracker``), and the step every request of their apps
goes through (``held_answered_logged``)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from types import EllipsisType
from typing import Any, Protocol, TypeVar

from starlette.requests import Request

from cotal_tasks.bridge.http.server import serve_http
from tests.support.clock import FakeClock

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


class FakeTracker:
    """A fake tracker's clock, its request log and what a test scripts into its answers.

    ``default_retry_after`` is what ``fail_next`` sends as ``Retry-After`` unless told."""

    default_retry_after: int | None = None

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.requests: list[RecordedRequest] = []
        self.failures: deque[ScriptedFailure] = deque()
        self.stalls: deque[ScriptedStall] = deque()
        self.refusal: tuple[int, str | None] | None = None
        # Runs before each authenticated request is answered (method, path, query): a
        # test edits state "between two page requests" with it.
        self.before_answer: Hook | None = None

    def fail_next(
        self,
        n: int = 1,
        *,
        status: int = 429,
        retry_after: int | EllipsisType | None = ...,
        message: str | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        """Answer the next ``n`` (authenticated) requests matching ``method``/``path`` (a
        glob over the path as sent, e.g. ``*/issues/3``) with ``status``: 429 (and on
        GitHub 403) as a rate limit, ``Retry-After`` unless ``None``; 5xx as a server
        error; other codes as the tracker's error body. They do not use up the budget."""
        wait = self.default_retry_after if retry_after is ... else retry_after
        for _ in range(n):
            self.failures.append(
                ScriptedFailure(status, wait, message, method and method.upper(), path)
            )

    def stall_next(
        self, seconds: float, *, method: str | None = None, path: str | None = None
    ) -> None:
        """Hold the answer to the next request matching ``method``/``path`` for ``seconds``
        of real time, then answer it (the write takes effect when it is answered)."""
        self.stalls.append(ScriptedStall(seconds, method and method.upper(), path))

    def refuse_writes(self, status: int | None = 403, message: str | None = None) -> None:
        """Refuse every POST/PATCH/PUT/DELETE with ``status`` (403, or 422, 404…) until
        called with ``None`` (or ``allow_writes``)."""
        self.refusal = None if status is None else (status, message)

    def allow_writes(self) -> None:
        self.refusal = None

    def calls(
        self, method: str | None = None, path: str | None = None, status: int | None = None
    ) -> list[RecordedRequest]:
        """Logged requests matching all given filters (``path`` is a glob)."""
        return [r for r in self.requests if r.matches(method, path, status)]

    @property
    def writes(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_write]


class Served(Protocol):
    api_url: str

    @property
    def app(self) -> Any: ...


@asynccontextmanager
async def serve_on_loopback(
    fake: Served, prefix: str = "", host: str = "127.0.0.1"
) -> AsyncIterator[str]:
    """Serve ``fake`` under uvicorn on a free loopback port; yield its API base URL (the
    server's, then ``prefix``). While it serves, ``fake.api_url`` is that URL, so JSON
    built by the fake's helpers matches what the server returns."""
    previous = fake.api_url
    async with serve_http(fake.app, host, 0) as base_url:
        fake.api_url = base_url + prefix
        try:
            yield fake.api_url
        finally:
            fake.api_url = previous


class Answer(Protocol):
    @property
    def status(self) -> int: ...


A = TypeVar("A", bound=Answer)


async def held_answered_logged(
    fake: FakeTracker,
    request: Request,
    path: str,
    body: Any,
    answer: Callable[[], A],
    logged_headers: frozenset[str] | set[str] | tuple[str, ...],
) -> A:
    """One request through a fake's app: held first if a stall is scripted for it, then
    answered, then logged (``path`` as sent, ``body`` parsed)."""
    stall = next((s for s in fake.stalls if s.applies(request.method, path)), None)
    if stall is not None:
        fake.stalls.remove(stall)
        await asyncio.sleep(stall.seconds)
    reply = answer()
    fake.requests.append(
        RecordedRequest(
            request.method,
            path,
            dict(request.query_params),
            {k: v for k, v in request.headers.items() if k in logged_headers},
            reply.status,
            body,
        )
    )
    return reply


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
