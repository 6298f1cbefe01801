"""What a hosted endpoint keeps in its mirror's database so several instances can share it:
named leases with expiry, and the write ledger.

A lease (``ct_leases``) is held by one holder until it expires or is released; taking it
is one conditional update or one insert, so it works the same on SQLite and PostgreSQL.
The sync leader holds ``sync:<endpoint>``; a write holds ``write:<task>`` so no two
instances write one issue at once.

The ledger (``ct_intents``) records every tracker write under the caller triple and
envelope id before the tracker call (``pending``) and after the mirror commit (``done``,
with the changeSeq the mirror took it at). A retry that finds its key pending reconciles
against the tracker instead of writing again; the sync reads the ``done`` rows as the
echo marks of the bridge's own writes, with what each write sent (``hosted.echo``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from cotal_tasks.providers.board import tables
from cotal_tasks.providers.board.checkpoints import mirror_unavailable

PENDING, DONE = "pending", "done"


def marker_of(key: str) -> str:
    """The short, stable mark a tracker write carries for ``key`` (no caller names in it)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


class Leases:
    """Named leases with expiry in the mirror's database."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def acquire(self, name: str, holder: str, now: int, ttl_ms: int) -> bool:
        """Take or renew ``name`` for ``holder`` until ``now + ttl_ms``; ``False`` when
        another holder has it and it has not expired."""
        lease = tables.leases
        try:
            async with self._engine.begin() as conn:
                taken = await conn.execute(
                    update(lease)
                    .where(
                        lease.c.name == name,
                        or_(lease.c.holder == holder, lease.c.until < now),
                    )
                    .values(holder=holder, until=now + ttl_ms)
                )
                if taken.rowcount:
                    return True
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            insert(lease).values(name=name, holder=holder, until=now + ttl_ms)
                        )
                except IntegrityError:
                    return False
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("leases", exc) from exc
        return True

    async def release(self, name: str, holder: str) -> None:
        lease = tables.leases
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    delete(lease).where(lease.c.name == name, lease.c.holder == holder)
                )
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("leases", exc) from exc

    async def holder(self, name: str, now: int) -> str | None:
        """Who holds ``name`` now (an expired lease is held by nobody)."""
        lease = tables.leases
        try:
            async with self._engine.connect() as conn:
                row = (
                    await conn.execute(
                        select(lease.c.holder).where(lease.c.name == name, lease.c.until >= now)
                    )
                ).first()
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("leases", exc) from exc
        return None if row is None else str(row.holder)


@dataclass(frozen=True, slots=True)
class Intent:
    key: str
    marker: str
    task_id: str | None
    number: int | None
    state: str
    change_seq: int | None
    created_at: int = 0  # when the first attempt began (epoch ms)


class Ledger:
    """The write ledger of one hosted endpoint's mirror."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get(self, key: str) -> Intent | None:
        i = tables.intents
        try:
            async with self._engine.connect() as conn:
                row = (await conn.execute(select(i).where(i.c.key == key))).first()
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc
        if row is None:
            return None
        return Intent(
            row.key, row.marker, row.task_id, row.number, row.state, row.change_seq, row.created_at
        )

    async def pending(
        self,
        key: str,
        task_id: str | None,
        number: int | None,
        holder: str,
        now: int,
        hold_ms: int,
        sent: str | None = None,
    ) -> None:
        """Record the write as pending (or take over the row of an earlier attempt, which
        keeps when that attempt began), with what it makes the issue say (``sent``, see
        ``hosted.echo``); for ``hold_ms``, unless the write finishes first, the sync skips
        a snapshot of its task only as its echo and reads anything else again later."""
        i = tables.intents
        keep: dict[str, object] = {"task_id": task_id} if task_id is not None else {}
        if sent is not None:
            keep["sent"] = sent
        if number is not None:
            keep["number"] = number
        try:
            async with self._engine.begin() as conn:
                moved = await conn.execute(
                    update(i)
                    .where(i.c.key == key)
                    .values(
                        holder=holder,
                        lease_until=now + hold_ms,
                        state=PENDING,
                        change_seq=None,
                        **keep,
                    )
                )
                if not moved.rowcount:
                    await conn.execute(
                        insert(i).values(
                            key=key,
                            marker=marker_of(key),
                            task_id=task_id,
                            number=number,
                            state=PENDING,
                            holder=holder,
                            lease_until=now + hold_ms,
                            created_at=now,
                            sent=sent,
                        )
                    )
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc

    async def located(self, key: str, task_id: str, number: int) -> None:
        """The tracker numbered the issue a pending create made: remember where it is."""
        await self._set(key, task_id=task_id, number=number)

    async def done(self, key: str, task_id: str, change_seq: int) -> None:
        await self._set(key, task_id=task_id, state=DONE, change_seq=change_seq)

    async def forget(self, key: str) -> None:
        """Nothing of the write took effect: drop its row."""
        i = tables.intents
        try:
            async with self._engine.begin() as conn:
                await conn.execute(delete(i).where(i.c.key == key, i.c.state == PENDING))
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc

    async def _set(self, key: str, **values: object) -> None:
        i = tables.intents
        try:
            async with self._engine.begin() as conn:
                await conn.execute(update(i).where(i.c.key == key).values(**values))
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc

    async def echoes(
        self, task_ids: Sequence[str], read_mark: int, now: int
    ) -> dict[str, frozenset[str]]:
        """The tasks among ``task_ids`` a tracker snapshot taken at ``read_mark`` may
        predate a write to (written through the endpoint after it, or with a write in
        flight), each with what those writes sent (``hosted.echo``): the snapshot is
        their echo only if it says one of those, and is read again otherwise."""
        if not task_ids:
            return {}
        i = tables.intents
        found: dict[str, set[str]] = {}
        try:
            async with self._engine.connect() as conn:
                for start in range(0, len(task_ids), 500):
                    chunk = list(task_ids[start : start + 500])
                    rows = await conn.execute(
                        select(i.c.task_id, i.c.sent).where(
                            i.c.task_id.in_(chunk),
                            or_(
                                and_(i.c.state == PENDING, i.c.lease_until >= now),
                                and_(i.c.state == DONE, i.c.change_seq > read_mark),
                            ),
                        )
                    )
                    for row in rows:
                        sent = found.setdefault(str(row.task_id), set())
                        if row.sent is not None:
                            sent.add(str(row.sent))
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc
        return {task_id: frozenset(sent) for task_id, sent in found.items()}

    async def prune(self, before: int) -> int:
        """Forget finished writes recorded before ``before`` (epoch ms)."""
        i = tables.intents
        try:
            async with self._engine.begin() as conn:
                result = await conn.execute(
                    delete(i).where(i.c.state == DONE, i.c.created_at < before)
                )
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("write ledger", exc) from exc
        return int(result.rowcount or 0)
