"""What a tracker write sent, kept with its intent: the sync recognises the bridge's own
echo by content, not by when it was read.

Revision ID: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ct_intents", sa.Column("sent", sa.Text))


def downgrade() -> None:
    op.drop_column("ct_intents", "sent")
