"""The queue of webhook refreshes (``hosted.refreshes``) on a virtual clock: what waits is
deduplicated, let out at the configured rate, and given up for one poll past an hour's
worth."""

from __future__ import annotations

from cotal_tasks.providers.hosted.refreshes import RefreshQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_same_issue_waits_once_and_the_rate_lets_out_a_bucket() -> None:
    clock = Clock()
    queue = RefreshQueue(30.0, clock)
    queue.add(range(100))
    queue.add(range(50))  # named again while waiting: nothing more
    assert len(queue.pending) == 100
    first = queue.take()
    assert first == set(range(30))  # a minute's worth at once, lowest first
    assert queue.take() == set()
    assert queue.ready_in_s() == 2.0  # 30 a minute: one every two seconds
    clock.now += 10
    assert queue.take() == set(range(30, 35))
    clock.now += 3600  # a quiet hour refills the bucket, never beyond it
    assert len(queue.take()) == 30


def test_too_many_waiting_or_none_named_is_one_poll_at_the_same_rate() -> None:
    clock = Clock()
    queue = RefreshQueue(1.0, clock)  # one a minute: an hour's worth is 60
    queue.add(range(61))
    assert (queue.pending, queue.poll_wanted, queue.dropped) == (set(), True, 61)
    assert queue.take_poll()
    assert not queue.take_poll()  # served
    queue.add(())  # a wake that named nothing: poll
    assert not queue.take_poll()  # the bucket is empty: it waits its turn
    assert queue.ready_in_s() == 60.0
    clock.now += 60
    assert queue.take_poll()
