"""HTTP to a hosted tracker: retries driven by its rate-limit headers, never retrying a
refusal (401, 404, 422, a plain 403), and failures translated to one error type.

Each tracker supplies a ``RetryPolicy``: given a response and the attempt number, the
seconds to wait before retrying it, or ``None`` when it must not be retried. Waits longer
than ``max_wait_s`` are not slept through: the request fails ``RateLimited`` and the sync
resumes from its checkpoint on a later poll.

Every answer is bounded before it costs memory or time: its body is read as it arrives
and refused past ``max_response_bytes`` (decoded, so a compressed bomb is refused too);
one attempt has ``deadline_s`` in all, connect, headers and body to its last byte (the
client's own timeout only bounds each wait for a byte, which a peer dripping a byte every
few seconds never trips; an endpoint sets it from ``request_timeout_s``); and a ``Link``
pagination (each request for the ``next`` URL the previous page named) ends with an error
past ``max_pages`` pages.

Every answer's rate-limit headers are read (``ratelimit``) into the budget the client
shares with every other client of the same credential (``credentials``): ``rate_budgets``
is the latest budget of each pool the tracker names, whichever client read it. Before each
attempt the request waits as that shared budget says (a rate-limit answer any of them
got, a pool at its reserve or spent, the spacing of mutations); a wait past
``max_wait_s`` fails ``RateLimited`` before anything is sent.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
)

from cotal_tasks.providers.hosted.boundary import as_list
from cotal_tasks.providers.hosted.credentials import (
    PAUSED,
    SPACING,
    SharedBudget,
    for_a_seat,
    is_mutation,
)
from cotal_tasks.providers.provider import RateBudget, SourceRefused

RETRYABLE_STATUS = frozenset({500, 502, 503, 504})
_BACKOFF_CAP_S = 30.0
_LINKS_KEPT = 64  # next URLs remembered, to count the pages of a Link walk
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class _Deadline(httpx.TransportError):
    """One attempt ran past its whole deadline (retried like any transport failure)."""


class TrackerHttpError(SourceRefused):
    """A final, non-success answer (or no answer) from the tracker."""

    def __init__(self, status: int | None, message: str, *, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: {status or 'no response'}: {message}")
        self.status = status
        self.message = message
        self.method = method
        self.path = path


class RefusedBeforeSending(TrackerHttpError):
    """A write the bridge refuses itself, from what the tracker answered before it (a
    transition the workflow does not offer, a screen field it requires): nothing was
    sent. ``status`` is the refusal the tracker would have given (422)."""


class RateLimited(TrackerHttpError):
    """The tracker asks for a wait longer than the bridge is willing to sleep (or the
    credential's shared budget does, before anything is sent)."""

    def __init__(
        self,
        until_s: float,
        *,
        status: int = 429,
        method: str,
        path: str,
        message: str = "rate limited",
    ) -> None:
        super().__init__(status, message, method=method, path=path)
        self.until_s = until_s


class RetryPolicy(Protocol):
    def __call__(self, response: httpx.Response, attempt: int, now_s: float) -> float | None: ...


def _cause(exc: BaseException) -> BaseException:
    """The innermost exception ``exc`` was raised from (the socket's own error)."""
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    return exc


def _refused(exc: BaseException) -> bool:
    return isinstance(exc, httpx.ConnectError) and isinstance(_cause(exc), ConnectionRefusedError)


def _worth_retrying(exc: BaseException) -> bool:
    """A transport failure is retried, except a refused connection: nothing listens at
    that address, which no retry within this request changes (the next poll asks again)."""
    return isinstance(exc, httpx.TransportError) and not _refused(exc)


def unanswered(exc: httpx.TransportError) -> str:
    """Why the tracker gave no answer, in words: the socket's own cause where it has one."""
    if isinstance(exc, _Deadline):
        return str(exc)
    if _refused(exc):
        return "connection refused"
    cause = _cause(exc)
    if isinstance(cause, socket.gaierror):
        return f"the host name does not resolve ({cause.strerror})"
    if isinstance(exc, httpx.TimeoutException):
        return f"{type(exc).__name__}: no answer within request_timeout_s"
    return f"{type(exc).__name__}: {exc or 'no answer'}"


def backoff(attempt: int) -> float:
    """Exponential backoff with full jitter: attempt 1 waits up to 1 s, then 2, 4, … 30."""
    return random.uniform(0, min(_BACKOFF_CAP_S, 2.0 ** (attempt - 1)))


def retry_after(headers: Mapping[str, str], now_s: float) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date)."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_s)
    except (TypeError, ValueError):
        return None


def origin(url: httpx.URL) -> str:
    """``scheme://host[:port]`` of a URL, the port only when it is not the default."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}".lower()


def message_of(response: httpx.Response) -> str:
    """The tracker's own error message, short, never the request's headers."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or "error"
    if isinstance(body, dict):
        jira = _jira_message(body)
        if jira:
            return jira[:300]
        for key in ("message", "error", "error_description"):
            if isinstance(body.get(key), str):
                text = body[key]
                errors = body.get("errors")
                if isinstance(errors, list) and errors:
                    text += f" ({errors[0]})"
                return str(text)[:300]
        graphql = as_list(body.get("errors"))  # a GraphQL answer's first error
        if graphql and isinstance(graphql[0], dict) and isinstance(graphql[0].get("message"), str):
            return str(graphql[0]["message"])[:300]
    return response.reason_phrase or "error"


def _jira_message(body: Mapping[str, Any]) -> str | None:
    """Jira's error body: ``{"errorMessages": [...], "errors": {field: message}}``."""
    messages = body.get("errorMessages")
    fields = body.get("errors")
    if not isinstance(messages, list) or not isinstance(fields, dict):
        return None
    parts = [m for m in messages if isinstance(m, str) and m]
    parts += [f"{k}: {v}" for k, v in fields.items() if isinstance(v, str)]
    return "; ".join(parts) or None


@dataclass
class TrackerHttp:
    """One tracker's HTTP client, its retry policy and its observers."""

    client: httpx.AsyncClient
    policy: RetryPolicy
    max_retries: int = 5
    max_wait_s: float = 900.0
    on_response: Callable[[str], None] = field(default=lambda status: None)
    on_wait: Callable[[float], None] = field(default=lambda seconds: None)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock_s: Callable[[], float] = time.time
    extra_origins: set[str] = field(default_factory=set)
    max_response_bytes: int = 32 << 20
    deadline_s: float = 30.0
    max_pages: int = 1000
    _pages: dict[str, int] = field(default_factory=dict)  # a next URL -> its page number
    # the budget of the credential, shared by every client using it (none given: this
    # client's own), its pacing, and this endpoint's part in it
    shared: SharedBudget = field(default_factory=SharedBudget)
    rate_reserve: float = 0.0  # of each pool, left to seats' writes (``reserve_of``)
    mutation_spacing_s: float = 0.0
    max_in_flight: int = 0  # requests of every user of the credential at once (0: no bound)
    # a wait for the shared budget: its cause (``SharedBudget.hold``) and seconds
    on_paced: Callable[[str, float], None] = field(default=lambda cause, seconds: None)
    credential: str | None = None  # the variable the token came from (token_env)
    source: str | None = None  # the repository or project the endpoint syncs

    @property
    def rate_budgets(self) -> dict[str, RateBudget]:
        """The latest rate-limit budget each pool reported to any user of the credential."""
        return self.shared.budgets

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The response (2xx or 304), after retries; else ``TrackerHttpError``, naming the
        token's variable and the repository or project (``credential``, ``source``).

        An absolute ``url`` on another origin than the API base (a ``Link`` next URL, a
        recorded ETag probe) is refused before anything is sent: the client carries the
        token, and the token only ever goes to the configured tracker.
        """
        try:
            return await self._request(method, url, params=params, json=json, headers=headers)
        except TrackerHttpError as exc:
            exc.credential = exc.credential or self.credential
            exc.source = exc.source or self.source
            raise

    async def _request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None,
        json: Any,
        headers: Mapping[str, str] | None,
    ) -> httpx.Response:
        path = httpx.URL(url).path
        self._check_origin(method, url, path)
        page = self._pages.pop(url, 1)
        if page > self.max_pages:
            raise too_many_pages(self.max_pages, method=method, path=path)

        def wait(state: RetryCallState) -> float:
            outcome = state.outcome
            if outcome is None or outcome.failed:
                return backoff(state.attempt_number)
            seconds = self.policy(outcome.result(), state.attempt_number, self.clock_s())
            return 0.0 if seconds is None else seconds

        def stop(state: RetryCallState) -> bool:
            return stop_after_attempt(self.max_retries + 1)(state) or (
                state.upcoming_sleep > self.max_wait_s
            )

        def retryable(response: httpx.Response) -> bool:
            return self.policy(response, 1, self.clock_s()) is not None

        async def before_sleep(state: RetryCallState) -> None:
            self.on_wait(state.upcoming_sleep)

        retrying = AsyncRetrying(
            wait=wait,
            stop=stop,
            retry=retry_if_result(retryable) | retry_if_exception(_worth_retrying),
            before_sleep=before_sleep,
            sleep=self.sleep,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
            reraise=True,
        )
        try:
            response: httpx.Response | None = await retrying(
                self._send, method, url, params, json, headers
            )
        except httpx.TransportError as exc:
            self.on_response("error")
            where = self.client.base_url.join(url)
            raise TrackerHttpError(
                None, f"{unanswered(exc)} at {origin(where)}", method=method, path=path
            ) from exc
        assert response is not None
        if response.status_code < 300 or response.status_code == 304:
            self._count_page(response, page)
            return response
        wait_s = self.policy(response, 1, self.clock_s())
        if wait_s is not None and response.status_code not in RETRYABLE_STATUS:
            raise RateLimited(
                self.clock_s() + wait_s, status=response.status_code, method=method, path=path
            )
        raise TrackerHttpError(response.status_code, message_of(response), method=method, path=path)

    def allow_origin(self, url: str) -> None:
        """Also send requests (with the token) to ``url``'s origin (a GraphQL endpoint)."""
        self.extra_origins.add(origin(httpx.URL(url)))

    def _check_origin(self, method: str, url: str, path: str) -> None:
        target = httpx.URL(url)
        if not target.is_absolute_url:
            return  # relative to the API base
        base = origin(self.client.base_url)
        if origin(target) == base or origin(target) in self.extra_origins:
            return
        raise TrackerHttpError(
            None,
            f"refused to follow a URL on {origin(target)}, not the configured API origin "
            f"{base}: the token is only sent there. Check api_url (a proxy or an Enterprise "
            "server must hand out links on its own origin)",
            method=method,
            path=path,
        )

    def _count_page(self, response: httpx.Response, page: int) -> None:
        following = response.links.get("next", {}).get("url")
        if following:
            while len(self._pages) >= _LINKS_KEPT:
                self._pages.pop(next(iter(self._pages)))
            self._pages[following] = page + 1

    async def _send(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None,
        json: Any,
        headers: Mapping[str, str] | None,
    ) -> httpx.Response:
        request = self.client.build_request(method, url, params=params, json=json, headers=headers)
        await self._pace(request, json)
        try:
            async with self.shared.turn(self.max_in_flight), asyncio.timeout(self.deadline_s):
                response = await self._bounded(request)
        except TimeoutError:
            raise _Deadline(
                f"no whole answer within {self.deadline_s:g} s (request_timeout_s, one attempt "
                "from connect to the body's last byte)",
                request=request,
            ) from None
        self.on_response(str(response.status_code))
        now = self.clock_s()
        self.shared.keep(response.headers, now)
        if response.status_code >= 400 and response.status_code not in RETRYABLE_STATUS:
            wait_s = self.policy(response, 1, now)
            if wait_s is not None:  # a rate-limit answer: every user of the credential waits
                self.shared.pause(now + wait_s)
        return response

    async def _pace(self, request: httpx.Request, json: Any) -> None:
        """Wait as the credential's shared budget says before sending ``request``: out a
        pause or a pool at its reserve (its floor for a seat's write), then the spacing
        of mutations. A wait past ``max_wait_s`` fails ``RateLimited``, nothing sent."""
        now = self.clock_s()
        path = request.url.path
        wait_s, cause = self.shared.hold(path, now, seat=for_a_seat(), reserve=self.rate_reserve)
        if wait_s > self.max_wait_s:
            until = now + wait_s
            raise RateLimited(until, method=request.method, path=path, message=held(cause, until))
        if wait_s > 0:
            await self._wait(cause, wait_s)
        if self.mutation_spacing_s and is_mutation(request.method, request.url, json):
            spaced = self.shared.space(self.mutation_spacing_s, self.clock_s())
            if spaced > 0:
                await self._wait(SPACING, spaced)

    async def _wait(self, cause: str, seconds: float) -> None:
        self.on_wait(seconds)
        self.on_paced(cause, seconds)
        await self.sleep(seconds)

    async def _bounded(self, request: httpx.Request) -> httpx.Response:
        """The answer, its body read as it arrives and refused past the size cap."""
        streamed = await self.client.send(request, stream=True)
        try:
            body = bytearray()
            async for chunk in streamed.aiter_bytes():
                body += chunk
                if len(body) > self.max_response_bytes:
                    self.on_response("too-large")
                    raise TrackerHttpError(
                        streamed.status_code,
                        f"the answer is larger than {self.max_response_bytes} bytes "
                        "(max_response_bytes); refused. Check api_url points at the tracker, "
                        "or raise max_response_bytes",
                        method=request.method,
                        path=request.url.path,
                    )
        finally:
            await streamed.aclose()
        kept = [(k, v) for k, v in streamed.headers.multi_items() if k not in _DROPPED_HEADERS]
        return httpx.Response(
            streamed.status_code,
            headers=kept,
            content=bytes(body),
            request=request,
            extensions=streamed.extensions,
        )


def held(cause: str, until_s: float) -> str:
    """Why a request waits, unsent, past ``max_wait_s``: ``cause`` as ``hold`` says."""
    when = datetime.fromtimestamp(until_s, UTC).isoformat(timespec="seconds")
    if cause == PAUSED:
        return (
            f"held until {when}: the tracker answered a request with this token with a "
            "rate limit, which every endpoint using the token waits out"
        )
    pool = f" ({cause})" if cause else ""
    return (
        f"held until {when}: the token's rate-limit budget{pool}, shared by every endpoint "
        "using it, is spent or down to the reserve left to seats' writes (rate_reserve)"
    )


def too_many_pages(max_pages: int, *, method: str, path: str) -> TrackerHttpError:
    """The refusal of a listing's page past ``max_pages``: nothing past it was asked."""
    return TrackerHttpError(
        None,
        f"the listing runs past {max_pages} pages (max_pages); stopped there, the sync "
        "resumes from its last page read on the next poll. Check api_url points at the "
        "tracker, or raise max_pages",
        method=method,
        path=path,
    )
