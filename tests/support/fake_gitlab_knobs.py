"""The fake GitLab's knobs: the Rack::Attack-style throttle budget and pagination limits,
over the scripted faults and the request log every fake tracker has (``FakeTracker``).
``FakeGitLab`` builds on it."""

from __future__ import annotations

from tests.support.clock import FakeClock
from tests.support.fake_tracker import FakeTracker


class FakeGitLabKnobs(FakeTracker):
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
      GitLab's issuable service does without the multiple-assignees licence),
    - ``endless_pages`` (a listing's path as sent, e.g. the project's issues: each of its
      offset pages names an ``x-next-page``, and a page past the end answers the last
      page again, as a server or a proxy that pages forever would; ``None``: none).
    """

    default_retry_after = 1

    def __init__(
        self,
        clock: FakeClock,
        *,
        rate_limit: int,
        max_offset: int | None,
        keyset_supported: bool,
        exclusive_scoped_labels: bool,
    ) -> None:
        super().__init__(clock)
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
        self.single_assignee = False
        self.endless_pages: str | None = None

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

    def advance(self, seconds: float = 1) -> int:
        """Move the clock; returns the new epoch ms."""
        return self.clock.advance(seconds)
