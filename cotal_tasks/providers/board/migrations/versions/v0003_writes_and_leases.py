"""Tracker write intents (idempotent write-back, echo marks) and named leases (the
hosted sync leader).

Revision ID: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ct_intents",
        sa.Column("key", sa.String(600), primary_key=True),
        sa.Column("marker", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(512)),
        sa.Column("number", sa.BigInteger),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("lease_until", sa.BigInteger, nullable=False),
        sa.Column("change_seq", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ct_intents_task", "ct_intents", ["task_id", "state"])
    op.create_index("ct_intents_created", "ct_intents", ["created_at"])
    op.create_table(
        "ct_leases",
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("until", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ct_leases")
    op.drop_table("ct_intents")
