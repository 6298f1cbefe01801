"""The board's tables (SQLAlchemy Core). Alembic migrations create and evolve them.

``tasks.seq`` is the keyset position: an increasing integer per task, so a page is
``WHERE seq > :after ORDER BY seq LIMIT n`` on an index, at the same cost anywhere.
``body`` is the full record and ``summary`` the page form, both as JSON text; the
indexed columns (status, the bound triple) exist for filters.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# SQLite only makes INTEGER PRIMARY KEY an auto-increment rowid alias.
Position = BigInteger().with_variant(Integer(), "sqlite")

tasks = Table(
    "ct_tasks",
    metadata,
    Column("seq", Position, primary_key=True, autoincrement=True),
    Column("task_id", String(512), nullable=False, unique=True),
    Column("status", String(16), nullable=False),
    Column("bound_owner", String(512)),
    Column("bound_actor", String(512)),
    Column("bound_uid", String(512)),
    Column("revision", Integer, nullable=False),
    Column("body", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ct_tasks_status_seq", "status", "seq"),
    Index("ct_tasks_bound_seq", "bound_owner", "bound_actor", "bound_uid", "seq"),
)

meta = Table(
    "ct_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

# The endpoint whose board this database holds (one row, written by the first endpoint
# served from it): the board's rows are not scoped by endpoint, so a database serves one.
endpoint = Table(
    "ct_endpoint",
    metadata,
    Column("slot", Integer, primary_key=True),  # always 1: one row, one claim
    Column("name", String(256), nullable=False),
    Column("claimed_at", BigInteger, nullable=False),
)

idempotency = Table(
    "ct_idempotency",
    metadata,
    Column("key", String(512), primary_key=True),
    Column("command", String(32), nullable=False),
    Column("args_digest", String(80), nullable=False),
    Column("result", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ct_idempotency_created", "created_at"),
)

history = Table(
    "ct_history",
    metadata,
    Column("id", Position, primary_key=True, autoincrement=True),
    Column("task_id", String(512), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("command", String(32), nullable=False),
    Column("actor", String(512), nullable=False),
    Column("status", String(16), nullable=False),
    Column("note", Text),
    Index("ct_history_task", "task_id", "id"),
)

sync_state = Table(
    "ct_sync_state",
    metadata,
    Column("key", String(256), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

deliveries = Table(
    "ct_deliveries",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("received_at", BigInteger, nullable=False),
    Index("ct_deliveries_received", "received_at"),
)

CHANGE_SEQ = "change_seq"

# Tracker writes of a hosted endpoint, keyed by the caller triple and envelope id: a row is
# written ``pending`` before the tracker call and ``done`` (with the changeSeq the mirror
# took it at, the echo mark the sync reads) after the mirror commit. A retry that finds
# a pending row reconciles against the tracker instead of writing again.
intents = Table(
    "ct_intents",
    metadata,
    Column("key", String(600), primary_key=True),
    Column("marker", String(64), nullable=False),
    Column("task_id", String(512)),
    Column("number", BigInteger),  # the tracker's issue number, once known
    Column("state", String(16), nullable=False),  # pending | done
    Column("holder", String(128), nullable=False),
    Column("lease_until", BigInteger, nullable=False),
    Column("change_seq", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    # What the write makes the issue say, as the mapping reads it (``hosted.echo``): the
    # sync skips a snapshot as the write's echo only when it says exactly that.
    Column("sent", Text),
    Index("ct_intents_task", "task_id", "state"),
    Index("ct_intents_created", "created_at"),
)

# Named leases with expiry: the hosted sync leader of an endpoint on a shared database.
leases = Table(
    "ct_leases",
    metadata,
    Column("name", String(256), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("until", BigInteger, nullable=False),
)
