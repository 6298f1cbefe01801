"""A poll reads the tracker one page ahead of its commits (``hosted.ahead``), on every
tracker against its fake on loopback: the next listing page is asked while this page's
checkpoint is being saved, and a failure of the page read ahead leaves the checkpoint at
the last committed page, from which the next poll resumes with nothing lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from cotal_tasks.providers.hosted.ahead import Ahead
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.sync import SyncEngine
from tests.providers.hosted_support import HostedEndpoint
from tests.providers.test_hosted_sync import BOUNDS, STATUS_OF
from tests.support.trackers import Side

ISSUES = 350  # four pages of 100 (Linear's page size set to 100 by its bound)


@pytest.fixture
async def endpoint(
    tracker_side: Side, tracker_fake: Any, tracker_url: str, tmp_path: Path
) -> AsyncIterator[HostedEndpoint[Any]]:
    """An endpoint on a fresh mirror over ``ISSUES`` bulk issues, nothing synced yet."""
    tracker_fake.bulk_issues(tracker_side.prefix, ISSUES)
    overrides = dict(BOUNDS[tracker_side.provider].overrides)
    async with tracker_side.open(tracker_fake, tracker_url, tmp_path / "b", **overrides) as opened:
        yield opened


def on_listing(side: Side, nth: int, action: Callable[[], None]) -> Callable[..., None]:
    """A ``before_answer`` hook: ``action`` just before the ``nth`` listing request (of the
    hook's life) is answered."""
    seen = 0

    def hook(method: str, path: str, query: dict[str, str]) -> None:
        nonlocal seen
        if method == side.listing[0] and fnmatchcase(path, side.listing[1]):
            seen += 1
            if seen == nth:
                action()

    return hook


def hold_checkpoint(
    sync: SyncEngine, monkeypatch: pytest.MonkeyPatch, nth: int, until: asyncio.Event
) -> list[dict[str, Any]]:
    """The poll's ``nth`` checkpoint (its ``nth`` page's) is saved only once ``until`` is
    set (waited for at most 10 s); returns the checkpoints as they are saved."""
    saves = sync.checkpoints
    save = saves.save
    saved: list[dict[str, Any]] = []

    async def held(key: str, value: dict[str, Any], at: int) -> None:
        if key == sync.key:
            saved.append(value)
            if len(saved) == nth:
                await asyncio.wait_for(until.wait(), 10)
        await save(key, value, at)

    monkeypatch.setattr(saves, "save", held)
    return saved


def reading_ahead() -> list[asyncio.Task[object]]:
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "") == Ahead._one.__qualname__
    ]


async def test_the_next_page_is_asked_while_this_one_is_committed(
    tracker_side: Side, endpoint: HostedEndpoint[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = asyncio.Event()
    endpoint.fake.before_answer = on_listing(tracker_side, 2, asked.set)
    # Page 1's checkpoint waits for page 2's request: a poll that asks the next page only
    # after it has committed this one never gets there (the wait times out).
    saved = hold_checkpoint(endpoint.sync, monkeypatch, 1, asked)

    report = await endpoint.poll()

    assert asked.is_set()
    assert len(saved) >= 4
    assert report.issues >= ISSUES
    assert len(await endpoint.all_tasks()) == ISSUES
    assert reading_ahead() == []


# Linear lists the newest first and keeps its walk's place (tests/providers/linear).
@pytest.mark.parametrize("tracker_side", ["github", "gitlab", "jira"], indirect=True)
async def test_a_failure_of_the_page_read_ahead_resumes_from_the_last_committed_page(
    tracker_side: Side, endpoint: HostedEndpoint[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    side, fake, sync = tracker_side, endpoint.fake, endpoint.sync
    bound = BOUNDS[side.provider]
    refused = asyncio.Event()

    def refuse() -> None:  # page 3, asked while page 2 is committed, is refused
        side.refuse_next_listing(fake)
        refused.set()

    fake.before_answer = on_listing(side, 3, refuse)
    saved = hold_checkpoint(sync, monkeypatch, 2, refused)

    with pytest.raises(TrackerHttpError) as failed:
        await endpoint.poll()

    assert failed.value.status == 403
    assert reading_ahead() == []
    assert len(saved) == 2  # pages 1 and 2; nothing after the refusal
    held = await sync.checkpoint()
    assert held["cursor"] == saved[1]["cursor"] == side.updated(fake, bound.boundary)
    assert len(await endpoint.all_tasks()) == bound.boundary

    fake.before_answer = None
    mark = len(fake.requests)
    report = await endpoint.poll()

    listing = side.listings(fake, mark)
    assert side.page_args(listing[0])[bound.since] == side.since(fake, bound.boundary, back_s=5)
    rest = ISSUES - bound.boundary
    assert (report.issues, report.changed) == (rest + bound.reread, rest)
    tasks = {int(t["taskId"].rsplit("#", 1)[1]): t for t in await endpoint.all_tasks()}
    assert sorted(tasks) == list(range(1, ISSUES + 1))
    status_of = STATUS_OF[side.provider]
    wrong = [n for n, t in tasks.items() if (t["status"], t["statusSource"]) != status_of(fake, n)]
    assert wrong == []
