"""The two-way harness: a person editing the tracker while a seat's write is in flight.

A case scripts where the person's edit lands relative to the seat's write (``before``
it, ``during`` it: the write's first tracker request is held in flight by the fake while
the edit lands and a poll runs, or ``after`` it) and what the webhooks do, then checks
what every case must: the documented winner on the tracker and in the mirror within one
poll, no lost update, no duplicate write, no write loop (no tracker write over three
idle polls) and a true ``outcome``.

Tracker-neutral: a tracker's suite hands in a ``Side`` (how a person edits its fake,
how its write requests are told apart) and an opened hosted endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from cotal_tasks.core import ContractError
from tests.providers.hosted_support import HostedEndpoint
from tests.support.fake_tracker import FakeTracker, Held

Json = dict[str, Any]
Edit = Callable[[], None]


class Side(Protocol):
    """What the harness needs of one tracker's fake."""

    @property
    def fake(self) -> FakeTracker: ...

    def write_path(self, number: int) -> str:
        """A glob matching the write requests to issue ``number``."""
        ...

    def read_path(self, number: int) -> str:
        """The path of the one-issue read of issue ``number`` (a GET, unless the side says
        otherwise in ``read_method``: a GraphQL read is a POST)."""
        ...


@dataclass
class Reply:
    """What the seat's command answered: the record, or the refusal."""

    record: Json | None = None
    error: ContractError | None = None

    @property
    def outcome(self) -> str | None:
        return None if self.error is None else self.error.outcome


async def answer(call: Awaitable[Json]) -> Reply:
    try:
        return Reply(record=await call)
    except ContractError as exc:
        return Reply(error=exc)


async def deliver(ep: HostedEndpoint[Any], number: int, times: int = 1) -> None:
    """A webhook delivery naming issue ``number`` (``times`` over: a duplicated one), as
    the sync loop takes it: the issue is read and mirrored at once."""
    for _ in range(times):
        ep.sync.wake([number])
        await ep.sync.refresh_woken()


def tracker_writes(fake: FakeTracker, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests[since:] if r.is_write]


async def during_write(
    ep: HostedEndpoint[Any],
    side: Side,
    number: int,
    write: Awaitable[Json],
    edit: Edit,
    *,
    landed: bool = False,
    poll_while_held: bool = True,
    wake_while_held: bool = False,
) -> Reply:
    """Run ``write`` with one of its requests held in flight: its first write to issue
    ``number`` (the person's edit lands before the seat's), or with ``landed`` the
    bridge's read of the issue after its write (the seat's write took effect, the bridge
    has not mirrored it yet). While it is held, the person's ``edit`` lands on the tracker
    and (``poll_while_held``) a poll runs, or (``wake_while_held``) a webhook's wake is
    refreshed; then the write goes on."""
    if landed:
        method = getattr(side, "read_method", "GET")
        held: Held = side.fake.hold_next(
            method=method, path=side.read_path(number), after_a_write=True
        )
    else:
        held = side.fake.hold_next(path=side.write_path(number), a_write=True)
    running = asyncio.ensure_future(answer(write))
    try:
        await asyncio.wait_for(held.arrived.wait(), 10)
        edit()
        ep.fake.advance(1)
        if poll_while_held:
            await ep.poll()
        if wake_while_held:
            await deliver(ep, number)
    finally:
        held.release()
    return await asyncio.wait_for(running, 10)


# Where the person's edit lands relative to the seat's write, and what the webhooks do:
# none came (the poll finds the edit), one came early (before the write, or while it was
# in flight), one came late (after the write answered), or one came twice.
WHEN = ["before", "during", "during-landed", "after"]
HOOKS = ["absent", "early", "late", "duplicated"]


async def write_beside_edit(
    ep: HostedEndpoint[Any],
    side: Side,
    number: int,
    write: Awaitable[Json],
    edit: Edit,
    *,
    when: str,
    hooks: str,
) -> Reply:
    """The seat's ``write`` to issue ``number`` with the person's ``edit`` landing
    ``when`` (one of ``WHEN``) and the webhooks doing ``hooks`` (one of ``HOOKS``)."""
    if when == "before":
        edit()
        if hooks == "early":
            await deliver(ep, number)
        reply = await answer(write)
    elif when.startswith("during"):
        reply = await during_write(
            ep,
            side,
            number,
            write,
            edit,
            landed=when == "during-landed",
            poll_while_held=hooks == "absent",
            wake_while_held=hooks in ("early", "duplicated"),
        )
    else:
        reply = await answer(write)
        edit()
    if hooks in ("late", "duplicated"):
        await deliver(ep, number, times=2 if hooks == "duplicated" else 1)
    return reply


async def assert_no_write_loop(ep: HostedEndpoint[Any], fake: FakeTracker) -> None:
    """Three idle polls write nothing to the tracker and change nothing in the mirror."""
    await ep.poll()  # the write's own echo may still be read once
    seq, mark = await ep.seq(), len(fake.requests)
    for _ in range(3):
        ep.fake.advance(5)
        await ep.poll()
    assert tracker_writes(fake, mark) == [], "idle polls wrote to the tracker"
    assert await ep.seq() == seq, "idle polls kept changing the mirror"
