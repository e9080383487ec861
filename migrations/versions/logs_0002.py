"""logs: redaction counts of gen_ai content log records (joined into their call's count)

Revision ID: logs_0002
Revises: logs_0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "logs_0002"
down_revision = "logs_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gen_ai_log_events") as batch:
        batch.add_column(sa.Column("redactions", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("counted", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("gen_ai_log_events") as batch:
        batch.drop_column("counted")
        batch.drop_column("redactions")
