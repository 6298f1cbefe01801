"""The fake GitLab's knobs and request log: the Rack::Attack-style throttle budget,
pagination limits, scripted faults and write refusals. ``FakeGitLab`` builds on it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from tests.support.clock import FakeClock
from tests.support.fake_tracker import RecordedRequest, ScriptedFailure, ScriptedStall


class FakeGitLabKnobs:
    """What a test can turn: see each method. Plain attributes may be set directly too:

    - ``rate_limit_headers`` (``False``: omit ``RateLimit-*``, gitlab#365728/#217312),
    - ``retry_after_header`` (``False``: a throttled 429 without ``Retry-After``),
    - ``max_offset`` (``50_000``: ``page * per_page`` beyond it answers 405 on lists
      that support keyset pagination; ``None``: no cap),
    - ``keyset_supported`` (``False``: GitLab before 18.3, which ignores
      ``pagination=keyset`` on project issues and answers with offset pagination),
    - ``count_limit`` (above it no ``x-total``/``x-total-pages``/``rel="last"``),
    - ``exclusive_scoped_labels`` (Premium: one label per ``scope::``; ``False``: Free,
      where several ``workflow::`` labels coexist),
    - ``single_assignee`` (Free: an issue keeps only the first id of ``assignee_ids``, as
      GitLab's issuable service does without the multiple-assignees licence).
    """

    def __init__(
        self,
        clock: FakeClock,
        *,
        rate_limit: int,
        max_offset: int | None,
        keyset_supported: bool,
        exclusive_scoped_labels: bool,
    ) -> None:
        self.clock = clock
        self.requests: list[RecordedRequest] = []
        # authenticated API throttle: ``rate_limit`` requests per ``rate_window`` seconds
        self.rate_window = 60
        self.rate_limit = rate_limit
        self.rate_observed = 0
        self.rate_reset = clock.seconds + self.rate_window
        self.rate_limit_headers = True
        self.retry_after_header = True
        self.max_offset = max_offset
        self.keyset_supported = keyset_supported
        self.count_limit = 10_000
        self.exclusive_scoped_labels = exclusive_scoped_labels
        self.failures: deque[ScriptedFailure] = deque()
        self.single_assignee = False
        self.stalls: deque[ScriptedStall] = deque()
        self.refusal: tuple[int, str | None] | None = None
        # Runs before each authenticated request is answered (method, raw path, query):
        # a test edits state "between two page requests" with it.
        self.before_answer: Callable[[str, str, dict[str, str]], None] | None = None

    # -- knobs -------------------------------------------------------------------------

    @property
    def rate_remaining(self) -> int:
        return max(0, self.rate_limit - self.rate_observed)

    def set_rate_limit(
        self, remaining: int, *, limit: int | None = None, reset_in: int = 60
    ) -> None:
        """The throttle budget: ``remaining`` requests until ``now + reset_in`` s, after
        which a new window of ``limit`` starts. At 0 requests get 429 ``Retry later``."""
        if limit is not None:
            self.rate_limit = limit
        self.rate_observed = max(0, self.rate_limit - remaining)
        self.rate_window = reset_in
        self.rate_reset = self.clock.seconds + reset_in

    def omit_rate_limit_headers(self, omit: bool = True) -> None:
        """Answer without ``RateLimit-*`` headers (gitlab#365728, #217312)."""
        self.rate_limit_headers = not omit

    def fail_next(
        self,
        n: int = 1,
        *,
        status: int = 429,
        retry_after: int | None = 1,
        message: str | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        """Answer the next ``n`` (authenticated) requests matching ``method``/``path`` (a
        glob over the raw path, e.g. ``*/issues/3``) with ``status``: 429 as a throttle
        (``Retry later``, ``Retry-After`` unless ``None``), 5xx as a server error, other
        codes as ``{"message": "<code> <reason>"}``. They do not use up the budget."""
        for _ in range(n):
            self.failures.append(
                ScriptedFailure(status, retry_after, message, method and method.upper(), path)
            )

    def stall_next(
        self, seconds: float, *, method: str | None = None, path: str | None = None
    ) -> None:
        """Hold the answer to the next request matching ``method``/``path`` for ``seconds``
        of real time, then answer it (the write takes effect when it is answered)."""
        self.stalls.append(ScriptedStall(seconds, method and method.upper(), path))

    def refuse_writes(self, status: int | None = 403, message: str | None = None) -> None:
        """Refuse every POST/PUT/DELETE with ``status`` (403, or 422, 404…) until called
        with ``None`` (or ``allow_writes``)."""
        self.refusal = None if status is None else (status, message)

    def allow_writes(self) -> None:
        self.refusal = None

    def advance(self, seconds: float = 1) -> int:
        """Move the clock; returns the new epoch ms."""
        return self.clock.advance(seconds)

    # -- the request log ---------------------------------------------------------------

    def calls(
        self, method: str | None = None, path: str | None = None, status: int | None = None
    ) -> list[RecordedRequest]:
        """Logged requests matching all given filters (``path`` is a glob)."""
        return [r for r in self.requests if r.matches(method, path, status)]

    @property
    def writes(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_write]
