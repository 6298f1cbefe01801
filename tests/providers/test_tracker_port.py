"""The hosted tracker port: what the ``Tracker`` base writes once over a tracker's seven
methods, and the webhook route over the ``WebhookReceiver`` port alone.

A tracker here is a few lines over a list of issues; the route is handed a receiver
that is not the hosted machinery's own, so it can only use what the port declares."""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

import pytest

from cotal_tasks.providers.hosted.boundary import ItemBoundary
from cotal_tasks.providers.hosted.http import TrackerHttpError
from cotal_tasks.providers.hosted.tracker import (
    ListPage,
    NativeState,
    NewIssue,
    Order,
    Step,
    TrackedIssue,
    Tracker,
    TrackerChange,
    TrackerRefused,
)
from cotal_tasks.providers.hosted.webhook import Scheme, receiver
from cotal_tasks.providers.provider import Looked, WebhookReceiver

PATH = "acme/widgets"


def issue(number: int, created_ms: int, mark: str | None = None) -> TrackedIssue:
    return TrackedIssue(
        number, f"{PATH}#{number}", "t", None, NativeState("open"), (), created_ms, 0, mark=mark
    )


class ListTracker(Tracker):
    """A tracker over a list of issues, newest first, ``per_page`` to a page; its writes
    are recorded with the loop time they were sent at."""

    name = "List"

    def __init__(self, issues: list[TrackedIssue], spacing_s: float = 0.0) -> None:
        super().__init__(ItemBoundary(self.name), path=PATH, mutation_spacing_s=spacing_s)
        self.issues = issues
        self.per_page = 2
        self.pages_read = 0
        self.sent: list[tuple[str, float]] = []
        self.marks: dict[int, set[str]] = {}
        self.refuse: str | None = None  # the step that fails

    async def list_changed(
        self, cursor: str | None, remembered: Mapping[str, Any]
    ) -> AsyncIterator[ListPage]:
        yield ListPage(self.issues)

    async def open_numbers(self) -> tuple[set[int], int]:
        return {i.number for i in self.issues}, 1

    async def fetch(self, number: int) -> TrackedIssue | None:
        return next((i for i in self.issues if i.number == number), None)

    async def newest(
        self, order: Order, since_ms: int | None = None
    ) -> AsyncGenerator[Sequence[TrackedIssue], None]:
        for start in range(0, len(self.issues), self.per_page):
            self.pages_read += 1
            yield self.issues[start : start + self.per_page]

    async def create(self, new: NewIssue) -> TrackedIssue:
        raise AssertionError("not used")

    async def steps(self, number: int, change: TrackerChange) -> Sequence[Step]:
        loop = asyncio.get_running_loop()

        def step(name: str) -> Step:
            async def send() -> None:
                if name == self.refuse:
                    raise TrackerHttpError(422, f"{name} refused", method="POST", path=name)
                self.sent.append((name, loop.time()))

            return name, send

        return [step(name) for name in ("assign", "labels", "comment")]

    async def comment_marks(self, number: int) -> Collection[str]:
        return self.marks.get(number, set())


def test_a_tracker_that_leaves_out_a_method_cannot_be_made() -> None:
    class Half(Tracker):
        name = "Half"

        async def open_numbers(self) -> tuple[set[int], int]:
            return set(), 0

    with pytest.raises(TypeError, match="abstract"):
        Half(ItemBoundary("Half"), path=PATH, mutation_spacing_s=0)  # type: ignore[abstract]


async def test_apply_sends_the_steps_in_order_spaced_by_the_setting() -> None:
    tracker = ListTracker([], spacing_s=0.05)
    await tracker.apply(1, TrackerChange(assign=("bot",)))
    names = [name for name, _ in tracker.sent]
    assert names == ["assign", "labels", "comment"]
    gaps = [b - a for (_, a), (_, b) in zip(tracker.sent, tracker.sent[1:], strict=False)]
    assert all(gap >= 0.045 for gap in gaps), (
        gaps
    )  # between every two writes, not only before the comment


async def test_a_refused_step_names_the_steps_that_took_effect() -> None:
    tracker = ListTracker([])
    tracker.refuse = "comment"
    with pytest.raises(TrackerRefused) as refused:
        await tracker.apply(1, TrackerChange(comment="hi"))
    assert refused.value.applied == ("assign", "labels")
    assert isinstance(refused.value.error, TrackerHttpError)

    tracker.refuse = "assign"
    with pytest.raises(TrackerRefused) as first:
        await tracker.apply(1, TrackerChange(comment="hi"))
    assert first.value.applied == ()


async def test_find_marked_reads_newest_first_and_stops_at_the_attempts_age() -> None:
    began = 10_000_000
    # Created 100 s apart, the first a second after the attempt began.
    issues = [issue(9 - i, began + 1000 - i * 100_000) for i in range(9)]
    issues[3] = issue(issues[3].number, issues[3].created_at, mark="feedc0de")
    tracker = ListTracker(issues)
    found = await tracker.find_marked("feedc0de", began)
    assert found is not None
    assert found.number == issues[3].number
    tracker.pages_read = 0
    assert await tracker.find_marked("0badf00d", began) is None
    # Pages of two: page 2 ends 299 s before the attempt (within the 300 s the tracker's
    # clock may lag), page 3 ends 499 s before it, so page 4 is never asked.
    assert tracker.pages_read == 3


async def test_recent_marks_and_task_ids_are_written_once() -> None:
    tracker = ListTracker([issue(3, 30), issue(2, 20), issue(1, 10)])
    assert [i.number for i in await tracker.recent(2)] == [3, 2]
    tracker.marks[2] = {"abc12345"}
    assert await tracker.has_marked_comment(2, "abc12345")
    assert not await tracker.has_marked_comment(3, "abc12345")
    assert tracker.number_of(f"{PATH}#7") == 7
    assert tracker.number_of("other/repo#7") is None


@dataclass
class PortOnly:
    """A receiver that is only the port: the route can use nothing else of it."""

    name: str = "stub"
    path: str = PATH
    secret: bytes | None = b"s" * 32
    max_issues: int = 3
    known_id: int | None = None
    holds: Callable[[int | None, str | None], bool] | None = None
    recorded: set[str] = field(default_factory=set)
    woken: list[set[int]] = field(default_factory=list)
    rereads: int = 0
    checked: int = 0  # ``delivered`` asked: only before a lookup
    moves: list[str] = field(default_factory=list)
    namings: int = 0  # ``named`` asked: only of a first delivery

    async def remembered_id(self) -> int | None:
        return None

    async def remember_id(self, pid: int) -> None:
        self.known_id = pid

    def named(self, event: str, payload: Mapping[str, Any]) -> set[int] | None:
        self.namings += 1
        return set(payload.get("issues", ()))

    async def lookup(self, event: str, payload: Mapping[str, Any]) -> Looked | None:
        return Looked(None) if event == "renamed" else None

    async def first_delivery(self, delivery_id: str, *, moved: bool = False) -> bool:
        if delivery_id in self.recorded:
            return False
        self.recorded.add(delivery_id)
        if moved:
            self.moves.append(delivery_id)
        return True

    def remembers(self, delivery_id: str) -> bool:
        return False  # nothing in memory: every delivery is asked of the record

    async def delivered(self, delivery_id: str) -> bool:
        self.checked += 1
        return delivery_id in self.recorded

    async def wake(self, numbers: set[int]) -> None:
        self.woken.append(numbers)

    async def reread(self) -> None:
        self.rereads += 1

    def covers(self, payload: Mapping[str, Any]) -> bool:
        return False

    async def rediscover(self) -> None:
        return None


SCHEME: Scheme[ListTracker] = Scheme(
    tracker="stub",
    label="Stub",
    what="repository",
    mismatch="bad signature",
    event_header="x-event",
    verify=lambda secret, headers, body: headers.get("x-sig") == secret.decode(),
    source=lambda payload: (payload.get("repo"), None),
    delivery=lambda headers, _payload: headers.get("x-id"),
    named=lambda tracker, most, event, payload: set(),
    lookup=None,  # the receiver's own lookup answers (PortOnly.lookup)
    lookup_events=frozenset({"renamed"}),
)


async def test_the_route_asks_only_what_the_receiver_port_declares() -> None:
    stub = PortOnly()
    port: WebhookReceiver = stub  # the port is all it is
    receive = receiver(SCHEME, [port])
    signed = {"x-sig": "s" * 32, "x-event": "issues", "x-id": "d1"}
    body = b'{"repo": "acme/widgets", "issues": [4, 5]}'

    assert (await receive({**signed, "x-sig": "wrong"}, body)).status == 401
    accepted = await receive(signed, body)
    assert accepted.status == 202, accepted.message
    assert stub.woken == [{4, 5}]
    assert stub.checked == 0  # an event no lookup serves costs no read before it is taken
    assert (await receive(signed, body)).message == "delivery already received"
    assert stub.namings == 1  # a redelivery's issues are not read again

    many = b'{"repo": "acme/widgets", "issues": [1, 2, 3, 4]}'
    assert (await receive({**signed, "x-id": "d2"}, many)).status == 202
    assert stub.woken[-1] == set()  # more than max_issues: one poll

    renamed = await receive({**signed, "x-id": "d3", "x-event": "renamed"}, body)
    assert renamed.status == 202
    assert stub.rereads == 1

    elsewhere = await receive({**signed, "x-id": "d4"}, b'{"repo": "acme/other"}')
    assert elsewhere.status == 404
