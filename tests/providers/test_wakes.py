"""Webhook wakes between the instances of a hosted endpoint: the NOTIFY payload (bounded:
too many issues become one "poll now" wake), and a listener on a real PostgreSQL that
hears the other instances' wakes for its own sync key only. On SQLite nothing is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.board.store import normalize_url
from cotal_tasks.providers.hosted import wakes
from tests.support.polling import eventually

KEY = "github:octo-org/hello-world"


def test_a_wake_names_its_key_its_sender_and_its_issues() -> None:
    payload = wakes.encode(KEY, "host:1:abc", [3, 1, 2, 2])
    assert wakes.decode(payload) == wakes.Wake(KEY, "host:1:abc", frozenset({1, 2, 3}))


def test_too_many_issues_become_one_poll_now_wake() -> None:
    many = range(1, wakes.MAX_NUMBERS + 2)
    payload = wakes.encode(KEY, "host:1:abc", many)
    assert wakes.decode(payload) == wakes.Wake(KEY, "host:1:abc", None)
    just = wakes.decode(wakes.encode(KEY, "host:1:abc", range(1, wakes.MAX_NUMBERS + 1)))
    assert just is not None
    assert just.numbers == frozenset(range(1, wakes.MAX_NUMBERS + 1))
    long_key = "github:" + "x" * 3900  # the numbers would overflow the bound: poll now
    payload = wakes.encode(long_key, "host:1:abc", range(10**9, 10**9 + 50))
    assert len(payload.encode()) < 8000  # PostgreSQL's limit
    assert wakes.decode(payload) == wakes.Wake(long_key, "host:1:abc", None)


@pytest.mark.parametrize(
    "payload",
    ["", "not json", "[1, 2]", '{"key": 1, "from": "a", "numbers": []}',
     '{"key": "k", "numbers": [1]}', '{"key": "k", "from": "a", "numbers": ["1"]}',
     '{"key": "k", "from": "a", "numbers": [true]}', '{"key": "k", "from": "a", "numbers": 3}'],
)  # fmt: skip
def test_a_malformed_payload_is_no_wake(payload: str) -> None:
    assert wakes.decode(payload) is None


def test_a_channel_is_a_short_identifier_per_key() -> None:
    name = wakes.channel(KEY)
    assert name.startswith(wakes.PREFIX)
    assert name.isidentifier()
    assert len(name) < 63
    assert wakes.channel(KEY + "x") != name


@pytest.fixture
async def mirror(postgres_database: str) -> AsyncIterator[Checkpoints]:
    engine = create_async_engine(normalize_url(postgres_database))
    try:
        yield Checkpoints(engine)
    finally:
        await engine.dispose()


class Woken:
    def __init__(self) -> None:
        self.calls: list[set[int]] = []

    def __call__(self, numbers: Iterable[int]) -> None:
        self.calls.append(set(numbers))


async def test_the_listener_hears_other_instances_for_its_own_key(mirror: Checkpoints) -> None:
    woken = Woken()
    listener = wakes.Listener(mirror, KEY, "leader", woken)
    await listener.ensure()
    try:
        assert listener.listening
        await wakes.send(mirror, KEY, "leader", {1})  # its own: ignored
        await wakes.send(mirror, "github:other/repo", "follower", {2})  # another channel
        await wakes.send(mirror, KEY, "follower", {3, 4})
        await wakes.send(mirror, KEY, "follower", range(1000))  # poll now

        await eventually(lambda: len(woken.calls) == 2, within_s=5, what="two wakes heard")
        assert woken.calls == [{3, 4}, set()]  # the empty wake: poll now
        assert listener.heard == 2
    finally:
        await listener.close()
    assert not listener.listening
    assert listener.server_pid() is None


async def test_on_sqlite_nothing_is_sent_and_nothing_listened(tmp_path: Path) -> None:
    engine = create_async_engine(normalize_url(f"sqlite:///{tmp_path / 'mirror.db'}"))
    try:
        state = Checkpoints(engine)
        woken = Woken()
        listener = wakes.Listener(state, KEY, "leader", woken)
        await listener.ensure()
        assert not listener.listening
        statements: list[str] = []
        event.listen(
            engine.sync_engine,
            "before_cursor_execute",
            lambda conn, cursor, statement, *rest: statements.append(statement),
        )
        await wakes.send(state, KEY, "follower", {1})  # a no-op, not an error
        assert statements == []  # nothing reached the database
        assert woken.calls == []
    finally:
        await engine.dispose()
