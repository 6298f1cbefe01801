"""The endpoint a board belongs to: one database holds one endpoint's board (its rows are
not scoped by endpoint), so the first endpoint served from it claims it.

Revision ID: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ct_endpoint",
        sa.Column("slot", sa.Integer, primary_key=True),  # always 1: one row, one claim
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("claimed_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ct_endpoint")
