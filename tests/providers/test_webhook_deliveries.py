"""The delivery ids a webhook receiver took (``hosted.webhook.Deliveries``), over a real
SQLite mirror: a replay of one this process recorded is answered from memory, with no
round trip to the mirror (before, every replay of a flood asked the mirror, most of what
it cost the event loop); what the memory does not hold is still the mirror's to say."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import BoardStore
from cotal_tasks.providers.hosted.webhook import DELIVERY_KEEP_MS, Deliveries

NOW = 1_780_000_000_000


async def test_a_replay_is_answered_from_memory_and_the_rest_by_the_mirror(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mirror.db"
    store = await BoardStore.open(f"sqlite:///{path}")
    clock = [NOW]
    deliveries = Deliveries(store.checkpoints(), lambda: clock[0])
    elsewhere = Deliveries(store.checkpoints(), lambda: clock[0])  # another instance's
    try:
        assert await deliveries.first("github:d1")
        assert not await elsewhere.first("github:d1")  # the mirror says: taken
        assert await elsewhere.first("github:d2")

        # The mirror cannot answer now: what this receiver recorded is still answered
        # (before: 503 for every replay); anything else is the mirror's, so unavailable.
        await store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"\x00garbage" * 4096)
        assert not await deliveries.first("github:d1")
        assert await deliveries.taken("github:d1")
        for unknown in ("github:d2", "github:d3"):  # another instance's; a new one
            with pytest.raises(ContractError) as caught:
                await deliveries.first(unknown)
            assert caught.value.code is ErrorCode.UNAVAILABLE

        # Past the mirror's keeping window the memory forgets too: the mirror is asked.
        clock[0] = NOW + DELIVERY_KEEP_MS
        with pytest.raises(ContractError):
            await deliveries.first("github:d1")
    finally:
        await store.close()


async def test_a_delivery_and_what_it_says_moved_are_one_commit_on_each_backend(
    board: BoardStore,
) -> None:
    """``first_delivery`` records an id and, for a new one only, the checkpoint values
    handed with it, in one transaction; an id past the keeping window counts as new
    though it was not deleted yet (expired ids are deleted at most once a minute)."""
    checkpoints = board.checkpoints()
    keep = DELIVERY_KEEP_MS
    moved = {"github:acme/x:moved": {"moved": "github:d1"}}
    assert await checkpoints.first_delivery("github:d1", NOW, keep, saves=moved)
    assert await checkpoints.load("github:acme/x:moved") == {"moved": "github:d1"}

    again = {"github:acme/x:moved": {"moved": "github:again"}}
    assert not await checkpoints.first_delivery("github:d1", NOW + 1, keep, saves=again)
    assert await checkpoints.load("github:acme/x:moved") == {"moved": "github:d1"}
    assert await checkpoints.delivered("github:d1", NOW + 1, keep)

    # Expired ids were deleted a moment before d1 expired (d2's record); within the
    # minute after, nothing is deleted, yet d1 past the window is new again, and its
    # record starts over from now.
    assert await checkpoints.first_delivery("github:d2", NOW + keep - 30_000, keep)
    later = NOW + keep + 1
    assert not await checkpoints.delivered("github:d1", later, keep)
    assert await checkpoints.first_delivery("github:d1", later, keep, saves=again)
    assert await checkpoints.load("github:acme/x:moved") == {"moved": "github:again"}
    assert not await checkpoints.first_delivery("github:d1", later + 1, keep)
    assert await checkpoints.delivered("github:d1", later + 1, keep)
