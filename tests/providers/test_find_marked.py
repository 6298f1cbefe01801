"""Finding an earlier create's issue by its mark: newest-first pages, read back to when the
attempt began (the tracker's clock allowed to lag), never without bound."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from cotal_tasks.providers.hosted.tracker import (
    CLOCK_SKEW_MS,
    MARKED_PAGES,
    NativeState,
    TrackedIssue,
    epoch_ms,
    find_marked_item,
)

BEGAN = epoch_ms("2026-12-01T10:00:00Z")


class Pages:
    """A newest-first listing of ``count`` issues, one created a second after another,
    ``per_page`` to a page (the last one short, as a tracker ends its listing)."""

    def __init__(self, count: int, per_page: int, newest: str = "2026-12-01T10:30:00Z") -> None:
        top = epoch_ms(newest)
        self.items = [_issue(count - i, top - i * 1000) for i in range(count)]
        self.per_page = per_page
        self.read: list[int] = []

    async def pages(self) -> AsyncIterator[Sequence[TrackedIssue]]:
        n = 1
        while True:
            self.read.append(n)
            page = self.items[(n - 1) * self.per_page : n * self.per_page]
            yield page
            if len(page) < self.per_page:
                return
            n += 1


def _issue(number: int, created_ms: int) -> TrackedIssue:
    return TrackedIssue(
        number, f"acme/widgets#{number}", "t", None, NativeState("open"), (), created_ms, 0
    )


async def test_the_mark_behind_a_full_page_of_newer_issues_is_found() -> None:
    pages = Pages(250, per_page=100)
    found = await find_marked_item(pages.pages(), BEGAN, lambda issue: issue.number == 40)
    assert found is not None
    assert found.number == 40
    assert pages.read == [1, 2, 3]


async def test_reading_stops_once_the_issues_are_older_than_the_attempt() -> None:
    # 1,800 issues a second apart back from 10:30: page 4 reaches 09:55, before 10:00
    # minus the five minutes a lagging tracker clock is allowed.
    pages = Pages(3000, per_page=600)
    assert CLOCK_SKEW_MS == 300_000
    assert await find_marked_item(pages.pages(), BEGAN, lambda issue: False) is None
    assert pages.read == [1, 2, 3, 4]


async def test_reading_stops_at_a_short_page_and_after_the_bound() -> None:
    short = Pages(150, per_page=100)
    assert await find_marked_item(short.pages(), BEGAN, lambda issue: False) is None
    assert short.read == [1, 2]

    endless = Pages(100 * (MARKED_PAGES + 5), per_page=100, newest="2027-01-01T00:00:00Z")
    assert await find_marked_item(endless.pages(), BEGAN, lambda issue: False) is None
    assert endless.read == list(range(1, MARKED_PAGES + 1))


async def test_an_unreadable_stamp_reads_on_within_the_bound() -> None:
    pages = Pages(300, per_page=100, newest="2026-12-01T09:00:00Z")  # all older
    for i in range(200):  # a stamp that did not read maps to 0: it proves nothing
        pages.items[i] = _issue(pages.items[i].number, 0)
    found = await find_marked_item(pages.pages(), BEGAN, lambda issue: issue.number == 50)
    assert found is not None
    assert pages.read == [1, 2, 3]
