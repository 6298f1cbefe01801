"""Apply the board's Alembic migrations on start, on the board's own connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import URL, Connection, event, text
from sqlalchemy.ext.asyncio import create_async_engine

MIGRATIONS = Path(__file__).with_name("migrations")
# Several bridge instances may start at once on one PostgreSQL; one migrates at a time.
_PG_MIGRATION_LOCK = 0x43545441534B53


def upgrade(connection: Connection) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def upgrade_sqlite(url: URL, connect_args: dict[str, Any]) -> None:
    """Migrate a SQLite board whole or not at all, one migrator at a time.

    Python's sqlite3 runs DDL outside any transaction, so a bridge killed half-way through
    its first start would leave tables without a version, and every later start would
    stop on "table already exists". Here the transaction is SQLite's own: the driver's
    implicit handling is off and each transaction opens with ``BEGIN IMMEDIATE``, which
    also makes a second bridge starting at the same moment wait, then find the board
    migrated. The engine is the migration's own, so the board's reads keep deferred
    transactions.
    """
    engine = create_async_engine(url, connect_args=connect_args)

    @event.listens_for(engine.sync_engine, "connect")
    def _driver_leaves_transactions_alone(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _begin_immediate(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        async with engine.begin() as connection:
            await connection.run_sync(upgrade)
    finally:
        await engine.dispose()
