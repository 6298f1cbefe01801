"""Mirror state for hosted trackers: sync checkpoints and webhook deliveries seen.

Revision ID: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ct_sync_state",
        sa.Column("key", sa.String(256), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "ct_deliveries",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("received_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ct_deliveries_received", "ct_deliveries", ["received_at"])


def downgrade() -> None:
    op.drop_table("ct_deliveries")
    op.drop_table("ct_sync_state")
