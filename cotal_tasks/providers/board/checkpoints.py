"""What a hosted tracker keeps beside its mirror, in the mirror's own database: sync
checkpoints (a JSON value per key) and the webhook deliveries already seen."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from cotal_tasks.core import ContractError, ErrorCode
from cotal_tasks.providers.board import tables

PRUNE_EVERY_MS = 60_000  # expired delivery ids are deleted at most this often


def mirror_unavailable(what: str, exc: BaseException) -> ContractError:
    """A mirror table that cannot be read or written, as the contract's ``unavailable``."""
    return ContractError(
        ErrorCode.UNAVAILABLE,
        f"the mirror's {what} cannot be read or written ({type(exc).__name__}). Check the "
        "database and retry",
    )


class Checkpoints:
    """The mirror's checkpoints table: a JSON value per key (a sync's cursor and what its
    tracker asked to keep, the published sync health, a project's path), and the webhook
    delivery ids already seen."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._pruned_at: int | None = None  # when expired delivery ids were last deleted

    @property
    def engine(self) -> AsyncEngine:
        """The mirror's database, for the write ledger and leases kept beside it."""
        return self._engine

    @property
    def shared(self) -> bool:
        """True on a database several bridge instances can share (PostgreSQL)."""
        return self._engine.dialect.name != "sqlite"

    async def load(self, key: str) -> dict[str, Any] | None:
        s = tables.sync_state
        try:
            async with self._engine.connect() as conn:
                value = (
                    await conn.execute(select(s.c.value).where(s.c.key == key))
                ).scalar_one_or_none()
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("sync state", exc) from exc
        if value is None:
            return None
        loaded: dict[str, Any] = json.loads(value)
        return loaded

    async def save(self, key: str, value: dict[str, Any], now: int) -> None:
        try:
            async with self._engine.begin() as conn:
                await _put(conn, key, value, now)
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("sync state", exc) from exc

    async def delivered(self, delivery_id: str, now: int, keep_ms: int) -> bool:
        """Whether a webhook delivery id was recorded within ``keep_ms`` (nothing is
        recorded: ``first_delivery`` does that)."""
        d = tables.deliveries
        try:
            async with self._engine.connect() as conn:
                found = await conn.execute(
                    select(d.c.id).where(d.c.id == delivery_id, d.c.received_at >= now - keep_ms)
                )
                return found.first() is not None
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("webhook deliveries", exc) from exc

    async def first_delivery(
        self,
        delivery_id: str,
        now: int,
        keep_ms: int,
        *,
        saves: Mapping[str, dict[str, Any]] | None = None,
    ) -> bool:
        """Record a webhook delivery id; ``False`` when it was recorded within ``keep_ms``
        (an older record is taken over: the id counts as new). ``saves``: checkpoint
        values written with a new id, in the same transaction (one commit for both), and
        not at all for a redelivery. Expired ids are deleted here at most once every
        ``PRUNE_EVERY_MS``: a delivery's commit is on a webhook's path."""
        d = tables.deliveries
        prune = self._pruned_at is None or not 0 <= now - self._pruned_at < PRUNE_EVERY_MS
        try:
            async with self._engine.begin() as conn:
                if prune:
                    await conn.execute(d.delete().where(d.c.received_at < now - keep_ms))
                new = _insert(conn)(d).values(id=delivery_id, received_at=now)
                recorded = await conn.execute(
                    new.on_conflict_do_update(
                        index_elements=[d.c.id],
                        set_={"received_at": new.excluded.received_at},
                        where=d.c.received_at < now - keep_ms,
                    )
                )
                first = recorded.rowcount != 0
                for key, value in (saves or {}).items() if first else ():
                    await _put(conn, key, value, now)
        except (SQLAlchemyError, OSError) as exc:
            raise mirror_unavailable("webhook deliveries", exc) from exc
        if prune:
            self._pruned_at = now
        return first


def _insert(conn: AsyncConnection) -> Any:
    """The dialect's own ``insert`` (with ``on_conflict_do_update``): SQLite or PostgreSQL."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


async def _put(conn: AsyncConnection, key: str, value: dict[str, Any], now: int) -> None:
    """Write one checkpoint value in ``conn``'s transaction."""
    s = tables.sync_state
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    result = await conn.execute(update(s).where(s.c.key == key).values(value=text, updated_at=now))
    if result.rowcount == 0:
        await conn.execute(insert(s).values(key=key, value=text, updated_at=now))
