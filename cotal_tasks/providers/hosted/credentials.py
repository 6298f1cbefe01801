"""One rate-limit budget per credential, shared by every endpoint and source using it.

The trackers meter a credential, not an endpoint: GitHub's primary and secondary limits
are per token across every repository (at most 100 requests in flight, mutations at least
a second apart), GitLab's per user, Jira's per account, Linear's two budgets (requests and
complexity points) per API key or OAuth user. Two endpoints configured with one token
spend one budget, so each must see what the other spent and wait when the other was told
to wait. ``CREDENTIALS`` (one per process) hands every ``TrackerHttp`` built for the same
tracker, API base URL and credential the same ``SharedBudget``, for as long as any of them
lives; different credentials never share one.

A credential is named by its fingerprint: an HMAC-SHA256 of the secret under a key drawn
at random when the process starts, cut to 12 hex digits. It tells two credentials apart
in ``/healthz`` and ``/metrics`` without revealing the secret or a form it can be
recovered from; it changes when the process restarts.

``TrackerHttp`` asks its ``SharedBudget`` before each attempt of each request (``hold``,
``space``), and tells it what each answer said (``keep``, ``pause``):

- A rate-limit answer (a 429, GitHub's secondary limit, Linear's ``RATELIMITED``) seen
  by any user pauses every user until its wait is over (``Retry-After``, else the
  tracker's own hint).
- A pool the request draws from (``ratelimit.draws_from``) whose budget is spent (the
  hard floor, 0) holds every request until the pool's reset.
- At or under the endpoint's reserve (``rate_reserve``), background work (the sync,
  its sweeps, webhook refreshes, discovery) waits for the reset too, while a seat's
  write (run under ``seat_write``) goes on to the hard floor: an import never starves
  the seats.
- Mutations keep ``mutation_spacing_s`` apart across every user of the credential.
- At most ``max_concurrent_requests`` requests are in flight at once across every user
  of the credential (``turn``): an endpoint over hundreds of repositories polls them all
  at its start, and GitHub allows a token 100 concurrent requests (its secondary limit)
  and asks for requests made one after another.

A pool whose reset is unknown, or past, holds nothing: the tracker's own answer decides.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import re
import secrets
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from cotal_tasks.providers.hosted.ratelimit import draws_from, keep_budget
from cotal_tasks.providers.provider import RateBudget

PAUSED = "retry-after"  # the cause of a wait a rate-limit answer asked for
SPACING = "spacing"  # the cause of a wait between two mutations
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_GRAPHQL_MUTATION = re.compile(r"\s*(?:#[^\n]*\n\s*)*mutation\b")

_seat = ContextVar("seat_write", default=False)


@contextmanager
def seat_write() -> Iterator[None]:
    """Requests made within are a seat's write (and the reads it needs): they keep the
    reserve of each pool, which background work leaves them."""
    token = _seat.set(True)
    try:
        yield
    finally:
        _seat.reset(token)


def for_a_seat() -> bool:
    """Whether the request being made is part of a seat's write."""
    return _seat.get()


def is_mutation(method: str, url: httpx.URL, json: Any) -> bool:
    """Whether a request changes something on the tracker: any method but a read, except
    a GraphQL document that is no ``mutation`` and a search (Jira's ``POST search/jql``),
    which are reads sent as ``POST``."""
    if method.upper() in _READS:
        return False
    if isinstance(json, Mapping) and isinstance(json.get("query"), str):
        return _GRAPHQL_MUTATION.match(json["query"]) is not None
    return "search" not in url.path.split("/")


def reserve_of(reserve: float, limit: int | None) -> int:
    """The requests (or points) a pool keeps for seats' writes: ``reserve`` below 1 is a
    share of the pool's limit (none while the limit is unknown), from 1 a count."""
    if reserve >= 1:
        return int(reserve)
    return math.ceil(reserve * limit) if limit else 0


@dataclass(eq=False)
class SharedBudget:
    """The latest budget of each pool any user of one credential saw, and its pacing."""

    fingerprint: str = ""
    budgets: dict[str, RateBudget] = field(default_factory=dict)
    paused_until_s: float = 0.0  # a rate-limit answer's wait, for every user
    next_mutation_s: float = 0.0  # the earliest a mutation may go
    in_flight: int = 0  # requests of every user being answered now
    _waiting: deque[asyncio.Future[None]] = field(default_factory=deque)

    @asynccontextmanager
    async def turn(self, most: int) -> AsyncIterator[None]:
        """One request in flight, once fewer than ``most`` of every user's are (0: no
        bound); waiting turns are given in the order they were asked."""
        if most > 0 and (self.in_flight >= most or self._waiting):
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                while True:
                    await waiter
                    if self.in_flight < most:
                        break
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiting.appendleft(waiter)  # still first in line
            except asyncio.CancelledError:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._next()  # woken, then cancelled: the turn passes on
                raise
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._next()

    def _next(self) -> None:
        """Wake the first request waiting for a turn."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def keep(self, headers: Mapping[str, str], now_s: float) -> None:
        """Record the budget of each pool an answer's ``headers`` report."""
        keep_budget(self.budgets, headers, now_s)

    def pause(self, until_s: float) -> None:
        """A rate-limit answer asks every user to wait until ``until_s``."""
        self.paused_until_s = max(self.paused_until_s, until_s)

    def hold(self, path: str, now_s: float, *, seat: bool, reserve: float) -> tuple[float, str]:
        """How long a request to ``path`` waits before it is sent (0: none), and why: a
        pause (``PAUSED``) or the pool it draws from that is at its floor (a seat's write)
        or its reserve (background work)."""
        wait, cause = self.paused_until_s - now_s, PAUSED
        for pool, budget in self.budgets.items():
            if budget.reset_ms is None or not draws_from(pool, path):
                continue
            floor = 0 if seat else reserve_of(reserve, budget.limit)
            until = budget.reset_ms / 1000 - now_s
            if budget.remaining <= floor and until > wait:
                wait, cause = until, pool
        return max(0.0, wait), cause

    def space(self, spacing_s: float, now_s: float) -> float:
        """Take the next mutation's turn: how long it waits to be ``spacing_s`` after the
        mutation before it, whichever endpoint sent that one."""
        turn = max(now_s, self.next_mutation_s)
        self.next_mutation_s = turn + spacing_s
        return turn - now_s

    def snapshot(self) -> tuple[RateBudget, ...]:
        """Each pool's latest budget, naming the credential's fingerprint."""
        return tuple(replace(b, credential=self.fingerprint) for b in self.budgets.values())


class Credentials:
    """The process's shared budgets, by tracker, API base URL and credential fingerprint;
    a budget lives while a ``TrackerHttp`` holds it."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._shared: weakref.WeakValueDictionary[tuple[str, str, str], SharedBudget] = (
            weakref.WeakValueDictionary()
        )

    def fingerprint(self, secret: str) -> str:
        """The credential's name: a keyed hash, never the secret or a reversible form."""
        return hmac.new(self._key, secret.encode(), hashlib.sha256).hexdigest()[:12]

    def budget(self, tracker: str, api_url: str, secret: str) -> SharedBudget:
        """The budget every user of ``secret`` on ``tracker`` at ``api_url`` shares."""
        url = httpx.URL(api_url)
        base = f"{url.scheme}://{url.host}:{url.port or ''}{url.path.rstrip('/')}".lower()
        key = (tracker, base, self.fingerprint(secret))
        shared = self._shared.get(key)
        if shared is None:
            shared = SharedBudget(key[2])
            self._shared[key] = shared
        return shared


CREDENTIALS = Credentials()
