"""Apply the board's Alembic migrations on start, on the board's own connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text

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
