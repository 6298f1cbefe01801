"""What both fake trackers share: the request log and its entries, scripted failures,
stalls and write refusals, the app and an in-process client (``FakeTracker``), the
routing of their endpoint tables (``route``), the step every request of their apps goes
through (``held_answered_logged``), and the material their records are made of."""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import EllipsisType
from typing import Any, Generic, Protocol, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cotal_tasks.bridge.http.server import serve_http
from tests.support.clock import FakeClock

Hook = Callable[[str, str, dict[str, str]], None]  # (method, path, query) before an answer

# Material for the fakes' ``bulk_issues``.
BULK_TITLES = (
    "crash on startup when config is empty",
    "sync drops labels with spaces",
    "add dark mode to the settings page",
    "timeout talking to the payments API",
    "document the retry policy",
    "flaky test in the scheduler suite",
    "support multiple assignees in export",
    "memory grows while idle",
    "wrong timezone in the weekly report",
    "rename the legacy CLI flags",
)

# The request headers every fake logs; each adds its tracker's own (``LOGGED_HEADERS``).
COMMON_LOGGED_HEADERS = ("authorization", "accept", "user-agent", "content-type")


def bulk_text(k: int, rng: random.Random) -> tuple[str, str]:
    """The title and body of the ``k``-th bulk issue (the body draws one number of ``rng``)."""
    title = f"{BULK_TITLES[k % len(BULK_TITLES)].capitalize()} ({k + 1})"
    return title, f"Seen in build {rng.randrange(1000, 9999)}.\n\nSteps:\n1. run it\n2. watch"


def fake_sha(*parts: object) -> str:
    """A 40-hex commit sha derived from ``parts``."""
    return hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()


def name_color(name: str) -> str:
    """Six hex digits derived from a label's name: the colour of a label no default names."""
    return f"{zlib.crc32(name.encode()) & 0xFFFFFF:06x}"


def is_write(method: str, path: str) -> bool:
    """Whether a request changes state: a write method, and not a read sent as a POST."""
    reads = path.endswith(("/graphql", "/search/jql")) or path.startswith("/graphql/")
    return method in ("POST", "PATCH", "PUT", "DELETE") and not reads


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
        """A request that changes state (a GraphQL query and a Jira JQL search are POSTs,
        but read; the fake Linear logs its queries as ``/graphql/<operation>``)."""
        return is_write(self.method, self.path)

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
class Scripted:
    """What a test scripts for the next request matching ``method``/``path`` (a glob)."""

    method: str | None
    path: str | None

    def applies(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or fnmatchcase(path, self.path)
        )


@dataclass
class ScriptedFailure(Scripted):
    status: int
    retry_after: int | None
    message: str | None


@dataclass
class ScriptedStall(Scripted):
    seconds: float


@dataclass
class Held(Scripted):
    """A request held in flight until the test lets it go (``release``): ``arrived`` is
    set when it reaches the fake; it takes effect only once released."""

    # Held only once the fake has taken more writes than this (``None``: any request).
    writes_before: int | None = None
    only_writes: bool = False  # held only if it is a write (POST, PATCH, PUT, DELETE)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


S = TypeVar("S", bound=Scripted)


def take_first(scripted: deque[S], method: str, path: str) -> S | None:
    """The first of ``scripted`` that applies to the request, taken out of the queue."""
    found = next((s for s in scripted if s.applies(method, path)), None)
    if found is not None:
        scripted.remove(found)
    return found


class FakeTracker:
    """A fake tracker's clock, its request log and what a test scripts into its answers,
    its app (``create_app`` builds it) and an in-process client on it.

    ``default_retry_after`` is what ``fail_next`` sends as ``Retry-After`` unless told;
    ``api_prefix`` is where the API lives below a served fake's root, ``client_url`` the
    base URL of ``client()``."""

    default_retry_after: int | None = None
    api_prefix = ""
    client_url: str
    api_url: str  # the API's base URL in the JSON the fake writes

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._app: Starlette | None = None
        self.requests: list[RecordedRequest] = []
        self.failures: deque[ScriptedFailure] = deque()
        self.stalls: deque[ScriptedStall] = deque()
        self.holds: deque[Held] = deque()
        # Seconds each write is held in flight before it takes effect (a real tracker's
        # write takes a few hundred milliseconds): ``None``, or a function drawing them.
        self.write_latency: Callable[[], float] | None = None
        self.refusal: tuple[int, str | None] | None = None
        # Runs before each authenticated request is answered (method, path, query): a
        # test edits state "between two page requests" with it.
        self.before_answer: Hook | None = None

    def create_app(self) -> Starlette:
        """The ASGI app serving this fake (its HTTP side)."""
        raise NotImplementedError

    @property
    def app(self) -> Starlette:
        """The ASGI app serving this state (for ``httpx.ASGITransport``)."""
        if self._app is None:
            self._app = self.create_app()
        return self._app

    def auth_headers(self) -> dict[str, str]:
        """The headers a well-behaved client sends."""
        raise NotImplementedError

    def client(self, base_url: str | None = None) -> httpx.AsyncClient:
        """An authenticated client talking to the app in-process (no socket)."""
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url=base_url or self.client_url,
            headers=self.auth_headers(),
        )

    def scripted_failure(
        self, method: str, path: str, query: dict[str, str]
    ) -> ScriptedFailure | None:
        """For an authenticated request: run ``before_answer``, then take the first
        scripted failure that applies (``None``: answer it as usual)."""
        if self.before_answer is not None:
            self.before_answer(method, path, query)
        return take_first(self.failures, method, path)

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
                ScriptedFailure(method and method.upper(), path, status, wait, message)
            )

    def stall_next(
        self, seconds: float, *, method: str | None = None, path: str | None = None
    ) -> None:
        """Hold the answer to the next request matching ``method``/``path`` for ``seconds``
        of real time, then answer it (the write takes effect when it is answered)."""
        self.stalls.append(ScriptedStall(method and method.upper(), path, seconds))

    def hold_next(
        self,
        *,
        method: str | None = None,
        path: str | None = None,
        after_a_write: bool = False,
        a_write: bool = False,
    ) -> Held:
        """Hold the next request matching ``method``/``path`` (``after_a_write``: the next
        one after the fake took a write; ``a_write``: the next write) in flight until the
        test calls ``release()`` on what this returns (a write takes effect when it is
        answered)."""
        writes = len(self.writes) if after_a_write else None
        held = Held(method and method.upper(), path, writes, a_write)
        self.holds.append(held)
        return held

    def take_held(self, method: str, path: str) -> Held | None:
        writes = len(self.writes)
        write = is_write(method, path)
        ready = [
            h
            for h in self.holds
            if (h.writes_before is None or writes > h.writes_before)
            and (write or not h.only_writes)
        ]
        found = take_first(deque(ready), method, path)
        if found is not None:
            self.holds.remove(found)
        return found

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


@asynccontextmanager
async def serve_on_loopback(fake: FakeTracker, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``fake`` under uvicorn on a free loopback port; yield its API base URL (the
    server's, then ``fake.api_prefix``). While it serves, ``fake.api_url`` is that URL,
    so JSON built by the fake's helpers matches what the server returns."""
    previous = fake.api_url
    async with serve_http(fake.app, host, 0) as base_url:
        fake.api_url = base_url + fake.api_prefix
        try:
            yield fake.api_url
        finally:
            fake.api_url = previous


C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True)
class Endpoint(Generic[C, R]):
    """One row of a fake's endpoint table: ``pattern`` matches the whole path (its groups
    are the path parameters) and ``handler`` answers from the request context."""

    method: str
    pattern: re.Pattern[str]
    handler: Callable[[C], R]
    free: bool = False  # does not count against GitHub's primary limit (``/rate_limit``)


def endpoint(
    method: str, pattern: str, handler: Callable[[C], R], free: bool = False
) -> Endpoint[C, R]:
    return Endpoint(method, re.compile(pattern), handler, free)


def route(
    endpoints: Sequence[Endpoint[C, R]], method: str, path: str
) -> tuple[Endpoint[C, R] | None, dict[str, str]]:
    """The endpoint answering ``method`` on ``path`` (a HEAD as its GET) and its path
    parameters, or ``(None, {})``."""
    path = path.rstrip("/") or "/"
    method = "GET" if method == "HEAD" else method
    for candidate in endpoints:
        if candidate.method == method:
            match = candidate.pattern.fullmatch(path)
            if match:
                return candidate, match.groupdict()
    return None, {}


class Answer(Protocol):
    @property
    def status(self) -> int: ...


A = TypeVar("A", bound=Answer)


def logging_app(
    fake: FakeTracker,
    read: Callable[[Request, bytes], tuple[str, Any, Callable[[], A]]],
    respond: Callable[[A], Response],
    logged_headers: tuple[str, ...],
) -> Starlette:
    """A fake's app: every path and method goes through ``read`` (given the request and
    its raw body: the path as sent, the body as logged, and how to answer), is held first
    if a stall is scripted for it, then answered, logged and sent as ``respond`` makes it."""

    async def dispatch(request: Request) -> Response:
        path, body, answer = read(request, await request.body())
        stall = take_first(fake.stalls, request.method, path)
        if stall is not None:
            await asyncio.sleep(stall.seconds)
        if fake.write_latency is not None and request.method in ("POST", "PATCH", "PUT", "DELETE"):
            await asyncio.sleep(fake.write_latency())
        held = fake.take_held(request.method, path)
        if held is not None:
            held.arrived.set()
            await held.released.wait()
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
        return respond(reply)

    methods = ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"]
    return Starlette(routes=[Route("/{path:path}", dispatch, methods=methods)])


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
