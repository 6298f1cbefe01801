"""The rate-limit budget a tracker's answers report, read from their documented headers.

- GitHub: ``x-ratelimit-remaining``, ``x-ratelimit-limit``, ``x-ratelimit-reset`` (epoch
  seconds) and ``x-ratelimit-resource`` (the pool: ``core``, ``graphql``, ``search``).
- GitLab: ``RateLimit-Remaining``, ``RateLimit-Limit``, ``RateLimit-Reset`` (epoch
  seconds); sometimes missing (gitlab#365728, #217312).
- Jira Cloud: ``X-RateLimit-Remaining``, ``X-RateLimit-Limit``, ``X-RateLimit-Reset`` (an
  ISO 8601 time) where it sends them; it may send none, and the budget stays unknown.
- Linear: two pools on every answer, ``X-RateLimit-Requests-Remaining`` / ``-Limit`` /
  ``-Reset`` (``requests``) and ``X-RateLimit-Complexity-Remaining`` / ``-Limit`` /
  ``-Reset`` (``complexity``: query points), each reset in epoch milliseconds.

A request draws from every pool its credential's answers named, but for GitHub's, one
per kind of request (``draws_from``): ``graphql`` for its GraphQL endpoint, ``search``
for its search API, ``core`` for the rest of its REST API.

Header names are case-insensitive, so GitHub's and Jira's spellings are one. A reset
that is a small number is read as seconds from now (the IETF draft's ``RateLimit-Reset``),
one past ``10**11`` as epoch milliseconds (Linear's), and an HTTP date is read
too. Every value is bounded: counts of at most 12 digits (a reset 13), a pool
name of at most 40 plain characters, at most ``MAX_POOLS`` pools kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from cotal_tasks.providers.hosted.boundary import as_ms
from cotal_tasks.providers.provider import RateBudget

MAX_POOLS = 16
# (remaining, limit, reset, the pool: ``None`` reads ``x-ratelimit-resource``)
_SPELLINGS: tuple[tuple[str, str, str, str | None], ...] = (
    ("x-ratelimit-remaining", "x-ratelimit-limit", "x-ratelimit-reset", None),  # GitHub, Jira
    ("ratelimit-remaining", "ratelimit-limit", "ratelimit-reset", None),  # GitLab
    *(  # Linear: its request and complexity pools, both on one answer
        (
            f"x-ratelimit-{pool}-remaining",
            f"x-ratelimit-{pool}-limit",
            f"x-ratelimit-{pool}-reset",
            pool,
        )
        for pool in ("requests", "complexity")
    ),
)
_GITHUB_POOLS = frozenset({"core", "graphql", "search"})
_RESOURCE = re.compile(r"[a-z0-9_.-]{1,40}")
_DELTA_BELOW_S = 1_000_000_000  # a reset below this (2001) is seconds from now
_MS_FROM = 100_000_000_000  # a reset past this (5138 as seconds) is epoch milliseconds


def read_budget(headers: Mapping[str, str], now_s: float) -> RateBudget | None:
    """The budget one answer's headers report (its first pool), or ``None``."""
    found = read_budgets(headers, now_s)
    return found[0] if found else None


def read_budgets(headers: Mapping[str, str], now_s: float) -> list[RateBudget]:
    """The budget of every pool one answer's headers report (none: ``[]``)."""
    found: list[RateBudget] = []
    for remaining_at, limit_at, reset_at, pool in _SPELLINGS:
        remaining = _count(headers.get(remaining_at))
        if remaining is None:
            continue
        resource = pool or (headers.get("x-ratelimit-resource") or "").strip().lower()
        found.append(
            RateBudget(
                remaining,
                _count(headers.get(limit_at)),
                _reset_ms(headers.get(reset_at), now_s),
                round(now_s * 1000),
                resource if _RESOURCE.fullmatch(resource) else "",
            )
        )
        if pool is None:
            break  # one generic spelling per answer
    return found


def keep_budget(kept: dict[str, RateBudget], headers: Mapping[str, str], now_s: float) -> None:
    """Record each budget ``headers`` report as its pool's latest in ``kept``."""
    for budget in read_budgets(headers, now_s):
        if budget.resource in kept or len(kept) < MAX_POOLS:
            kept[budget.resource] = budget


def draws_from(pool: str, path: str) -> bool:
    """Whether a request to ``path`` spends the budget of ``pool``: GitHub's pools each
    meter one kind of request; any other pool (GitLab's and Jira's, unnamed; Linear's
    ``requests`` and ``complexity``) meters every request."""
    if pool not in _GITHUB_POOLS:
        return True
    segments = path.rstrip("/").split("/")
    kind = "graphql" if segments[-1] == "graphql" else "search" if "search" in segments else "core"
    return pool == kind


def _count(value: str | None, digits: int = 12) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isdigit() and len(text) <= digits else None


def _reset_ms(value: str | None, now_s: float) -> int | None:
    text = (value or "").strip()[:64]
    if not text:
        return None
    seconds = _count(text, 13)  # epoch milliseconds have 13 digits
    if seconds is not None:
        if seconds >= _MS_FROM:
            return seconds
        return round((now_s + seconds if seconds < _DELTA_BELOW_S else seconds) * 1000)
    stamp = as_ms(text)  # Jira: an ISO 8601 time
    if stamp:
        return stamp
    try:
        return round(parsedate_to_datetime(text).timestamp() * 1000)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
