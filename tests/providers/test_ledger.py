"""The leases and the write ledger a hosted endpoint keeps in its mirror, on SQLite and
PostgreSQL: one holder at a time until expiry, renewal by the holder, echo marks."""

from __future__ import annotations

from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.ledger import DONE, PENDING, Leases, Ledger, marker_of

NOW = 1_780_000_000_000


async def test_a_lease_has_one_holder_until_it_expires_or_is_released(board: BoardStore) -> None:
    leases = Leases(board.checkpoints().engine)
    assert await leases.acquire("sync:x", "a", NOW, 1000)
    assert not await leases.acquire("sync:x", "b", NOW + 500, 1000)  # a holds it
    assert await leases.acquire("sync:x", "a", NOW + 900, 1000)  # a renews: until NOW+1900
    assert not await leases.acquire("sync:x", "b", NOW + 1500, 1000)
    assert await leases.holder("sync:x", NOW + 1500) == "a"
    assert await leases.acquire("sync:x", "b", NOW + 2000, 1000)  # expired: b takes it
    assert await leases.holder("sync:x", NOW + 2000) == "b"
    await leases.release("sync:x", "a")  # not a's any more: nothing happens
    assert await leases.holder("sync:x", NOW + 2000) == "b"
    await leases.release("sync:x", "b")
    assert await leases.holder("sync:x", NOW + 2000) is None
    assert await leases.acquire("sync:x", "c", NOW + 2001, 1000)


async def test_the_ledger_records_writes_and_their_echo_marks(board: BoardStore) -> None:
    ledger = Ledger(board.checkpoints().engine)
    key = "local.builder/u1:e-1"
    await ledger.pending(key, "o/r#1", 1, "i1", NOW, 10_000, sent='["t",null,"claimed",null]')
    pending = await ledger.get(key)
    assert pending is not None
    assert (pending.state, pending.marker, pending.created_at) == (PENDING, marker_of(key), NOW)
    # in flight, with what it sent
    assert await ledger.echoes(["o/r#1", "o/r#2"], 0, NOW) == {
        "o/r#1": frozenset({'["t",null,"claimed",null]'})
    }
    assert await ledger.echoes(["o/r#1"], 0, NOW + 20_000) == {}  # held too long: stale

    await ledger.pending(key, "o/r#1", 1, "i2", NOW + 1, 10_000)  # a retry takes over
    again = await ledger.get(key)
    assert again is not None
    assert (again.marker, again.created_at) == (pending.marker, NOW)  # the first attempt's
    await ledger.done(key, "o/r#1", 42)
    found = await ledger.get(key)
    assert found is not None
    assert (found.state, found.change_seq, found.number) == (DONE, 42, 1)
    assert set(await ledger.echoes(["o/r#1"], 41, NOW)) == {"o/r#1"}  # written after the read
    assert await ledger.echoes(["o/r#1"], 42, NOW) == {}

    await ledger.pending("k2", None, None, "i1", NOW, 10_000)
    await ledger.forget("k2")
    assert await ledger.get("k2") is None
    assert await ledger.prune(NOW + 1) == 1  # the finished write, recorded before NOW + 1
    assert await ledger.get(key) is None
