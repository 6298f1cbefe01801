"""The first board schema: tasks, change counter, idempotency results, history.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_position = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "ct_tasks",
        sa.Column("seq", _position, primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(512), nullable=False, unique=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("bound_owner", sa.String(512)),
        sa.Column("bound_actor", sa.String(512)),
        sa.Column("bound_uid", sa.String(512)),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ct_tasks_status_seq", "ct_tasks", ["status", "seq"])
    op.create_index(
        "ct_tasks_bound_seq", "ct_tasks", ["bound_owner", "bound_actor", "bound_uid", "seq"]
    )
    op.create_table(
        "ct_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(
        sa.table("ct_meta", sa.column("key", sa.String), sa.column("value", sa.BigInteger)),
        [{"key": "change_seq", "value": 0}],
    )
    op.create_table(
        "ct_idempotency",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("args_digest", sa.String(80), nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ct_idempotency_created", "ct_idempotency", ["created_at"])
    op.create_table(
        "ct_history",
        sa.Column("id", _position, primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(512), nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(512), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("note", sa.Text),
    )
    op.create_index("ct_history_task", "ct_history", ["task_id", "id"])


def downgrade() -> None:
    for table in ("ct_history", "ct_idempotency", "ct_meta", "ct_tasks"):
        op.drop_table(table)
