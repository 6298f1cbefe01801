"""Reading a walk one page ahead (``hosted.ahead``), on a walk of plain pages: the next
page is asked while the caller works on this one, a failure of the page read ahead
reaches the caller only when it asks for that page, and a caller that stops early leaves
no page in flight and the walk closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from cotal_tasks.providers.hosted.ahead import Ahead, one_ahead


class Walk:
    """Pages 1..``pages``, logging when each is asked and served; page ``fails`` raises
    instead, and page ``hangs`` waits until it is cancelled."""

    def __init__(self, pages: int, fails: int = 0, hangs: int = 0) -> None:
        self.pages, self.fails, self.hangs = pages, fails, hangs
        self.log: list[str] = []
        self.closed = False

    async def walk(self) -> AsyncIterator[int]:
        try:
            for n in range(1, self.pages + 1):
                self.log.append(f"ask {n}")
                await asyncio.sleep(0)  # the request
                if n == self.fails:
                    raise RuntimeError(f"page {n} refused")
                if n == self.hangs:
                    await asyncio.Event().wait()
                yield n
        finally:
            self.closed = True


def pending_pages() -> list[asyncio.Task[object]]:
    """Tasks of this loop still reading a page ahead."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "") == Ahead._one.__qualname__
    ]


async def commit_each(walk: Walk, commit: Callable[[int], None] = lambda n: None) -> None:
    """Walk one page ahead, each page "committed" over a short while, then ``commit``."""
    async with one_ahead(walk.walk()) as pages:
        async for n in pages:
            await asyncio.sleep(0.01)  # the commit: the next page is asked meanwhile
            walk.log.append(f"commit {n}")
            commit(n)


def nothing_left(walk: Walk) -> bool:
    """The walk was closed, and no page is still being read ahead."""
    return walk.closed and pending_pages() == []


async def test_the_next_page_is_asked_while_the_caller_commits_this_one() -> None:
    walk = Walk(3)
    await commit_each(walk)
    assert walk.log == ["ask 1", "ask 2", "commit 1", "ask 3", "commit 2", "commit 3"]
    assert nothing_left(walk)


async def test_a_failure_ahead_reaches_the_caller_after_the_page_before_it() -> None:
    walk = Walk(3, fails=2)
    with pytest.raises(RuntimeError, match="page 2 refused"):
        await commit_each(walk)
    # Page 2 failed while page 1 was committed; page 1's commit ended first.
    assert walk.log == ["ask 1", "ask 2", "commit 1"]
    assert nothing_left(walk)


def refuse(n: int) -> None:
    raise ValueError(f"commit of page {n}")


async def test_a_caller_that_stops_early_cancels_the_page_in_flight() -> None:
    walk = Walk(3, hangs=2)
    with pytest.raises(ValueError, match="commit of page 1"):
        await commit_each(walk, refuse)  # page 2 is in flight, and hangs
    assert walk.log == ["ask 1", "ask 2", "commit 1"]
    assert nothing_left(walk)

    walk = Walk(3, hangs=2)
    async with one_ahead(walk.walk()) as pages:
        async for _ in pages:
            await asyncio.sleep(0.01)
            break  # nothing changed (a 304): the rest is not read
    assert nothing_left(walk)


async def test_a_poll_cancelled_while_a_page_is_ahead_leaves_nothing_running() -> None:
    walk = Walk(3, hangs=2)
    started = asyncio.Event()

    async def poll() -> None:
        async with one_ahead(walk.walk()) as pages:
            async for _ in pages:
                started.set()
                await asyncio.Event().wait()  # a commit that never ends

    task = asyncio.create_task(poll())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert nothing_left(walk)
