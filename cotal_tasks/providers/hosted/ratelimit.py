"""The rate-limit budget a tracker's answers report, read from their documented headers.

- GitHub: ``x-ratelimit-remaining``, ``x-ratelimit-limit``, ``x-ratelimit-reset`` (epoch
  seconds) and ``x-ratelimit-resource`` (the pool: ``core``, ``graphql``, ``search``).
- GitLab: ``RateLimit-Remaining``, ``RateLimit-Limit``, ``RateLimit-Reset`` (epoch
  seconds); sometimes missing (gitlab#365728, #217312).
- Jira Cloud: ``X-RateLimit-Remaining``, ``X-RateLimit-Limit``, ``X-RateLimit-Reset`` (an
  ISO 8601 time) where it sends them; it may send none, and the budget stays unknown.

Header names are case-insensitive, so GitHub's and Jira's spellings are one. A reset
that is a small number is read as seconds from now (the IETF draft's ``RateLimit-Reset``),
and an HTTP date is read too. Every value is bounded: counts of at most 12 digits, a pool
name of at most 40 plain characters, at most ``MAX_POOLS`` pools kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from cotal_tasks.providers.hosted.boundary import as_ms
from cotal_tasks.providers.provider import RateBudget

MAX_POOLS = 16
_SPELLINGS = (
    ("x-ratelimit-remaining", "x-ratelimit-limit", "x-ratelimit-reset"),  # GitHub, Jira
    ("ratelimit-remaining", "ratelimit-limit", "ratelimit-reset"),  # GitLab
)
_RESOURCE = re.compile(r"[a-z0-9_.-]{1,40}")
_DELTA_BELOW_S = 1_000_000_000  # a reset below this (2001) is seconds from now


def read_budget(headers: Mapping[str, str], now_s: float) -> RateBudget | None:
    """The budget one answer's headers report, or ``None`` when they report none."""
    for remaining_at, limit_at, reset_at in _SPELLINGS:
        remaining = _count(headers.get(remaining_at))
        if remaining is None:
            continue
        resource = (headers.get("x-ratelimit-resource") or "").strip().lower()
        return RateBudget(
            remaining,
            _count(headers.get(limit_at)),
            _reset_ms(headers.get(reset_at), now_s),
            round(now_s * 1000),
            resource if _RESOURCE.fullmatch(resource) else "",
        )
    return None


def keep_budget(kept: dict[str, RateBudget], headers: Mapping[str, str], now_s: float) -> None:
    """Record the budget ``headers`` report as its pool's latest in ``kept``."""
    budget = read_budget(headers, now_s)
    if budget is not None and (budget.resource in kept or len(kept) < MAX_POOLS):
        kept[budget.resource] = budget


def _count(value: str | None) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isdigit() and len(text) <= 12 else None


def _reset_ms(value: str | None, now_s: float) -> int | None:
    text = (value or "").strip()[:64]
    if not text:
        return None
    seconds = _count(text)
    if seconds is not None:
        return round((now_s + seconds if seconds < _DELTA_BELOW_S else seconds) * 1000)
    stamp = as_ms(text)  # Jira: an ISO 8601 time
    if stamp:
        return stamp
    try:
        return round(parsedate_to_datetime(text).timestamp() * 1000)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
