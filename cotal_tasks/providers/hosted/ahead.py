"""One page ahead: the next page of a walk is fetched while the sync commits this one.

A poll's time is the tracker's (its answers to the listing and to the evidence requests
of each page) plus the sync's (mapping each page onto records and committing it to the
mirror, then checkpointing). Done one after the other, every page's commit adds to the
wait for the next; against a real tracker, whose answers take hundreds of milliseconds,
that is most of an import. ``one_ahead`` asks the walk for page N+1 as soon as page N is
handed to the sync, so the tracker answers the next page while this one is committed.

It changes no order and no rule: pages, and the error that ends a walk, reach the sync in
the walk's order, and the walk is never more than one page ahead (the same requests, one
in flight at a time, paced by the same rate-limit budget; a page more only when a commit
fails while it is in flight). The sync still commits a page
before it checkpoints it and checkpoints before it takes the next, so the cursor and every
validator pass only what was committed. A failure while the next page is fetched (a rate
limit, a refused request, an item that breaks the walk) reaches the sync only when it asks
for that page, after the page before it was committed and checkpointed; the next poll
resumes from there. A tracker's walk keeps its state to itself (what it has listed, the
edge of its cursor) and hands the sync each page's ``remember`` as a value, so a page read
ahead changes nothing the sync holds for the page it is committing.

When the sync stops early (nothing changed, a commit failed, the poll was cancelled) the
page in flight is cancelled and waited for, and the walk is closed: nothing outlives the
poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class _End:
    """The walk has no more pages (a task cannot carry ``StopAsyncIteration``)."""


_END = _End()


class Ahead(Generic[T]):
    """An async iterator over ``pages`` that fetches the next one while the caller works
    on the current one. Use it through ``one_ahead``, which closes it."""

    def __init__(self, pages: AsyncIterator[T]) -> None:
        self._pages = pages
        self._next: asyncio.Task[T | _End] | None = None
        self._done = False

    def __aiter__(self) -> Ahead[T]:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        task = self._next = self._next or self._fetch()
        try:
            page = await task
        except BaseException:
            self._done = True  # the walk ended with this error: nothing follows it
            if task.done():
                self._next = None  # its outcome is the caller's
            raise
        if isinstance(page, _End):
            self._done = True
            raise StopAsyncIteration
        self._next = self._fetch()  # in flight while the caller commits ``page``
        return page

    def _fetch(self) -> asyncio.Task[T | _End]:
        return asyncio.get_running_loop().create_task(self._one())

    async def _one(self) -> T | _End:
        try:
            return await anext(self._pages)
        except StopAsyncIteration:
            return _END

    async def aclose(self) -> None:
        """Cancel the page in flight, wait until it has stopped, and close the walk."""
        self._done = True
        task, self._next = self._next, None
        if task is not None:
            task.cancel()
            await _settled(task)
            if not task.cancelled() and (exc := task.exception()) is not None:
                # The sync stopped before it asked for this page: its failure is not the
                # poll's (the next poll asks for the page again).
                log.debug("a page read ahead failed after the sync stopped: %r", exc)
        close = getattr(self._pages, "aclose", None)
        if close is not None:
            await close()


async def _settled(task: asyncio.Task[object]) -> None:
    """Wait until ``task`` is done, even if this caller is cancelled meanwhile (then
    re-raise that cancellation): a cancelled page must not outlive its poll."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


@asynccontextmanager
async def one_ahead(pages: AsyncIterator[T]) -> AsyncIterator[Ahead[T]]:
    """``pages`` read one page ahead of the caller, for the block's duration."""
    ahead = Ahead(pages)
    try:
        yield ahead
    finally:
        await ahead.aclose()
