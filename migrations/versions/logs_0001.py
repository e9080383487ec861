"""logs: gen_ai content log records waiting for their span (scores: external_scores, search_0002)

Revision ID: logs_0001
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "logs_0001"
down_revision = "0003"
branch_labels = ("logs",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "gen_ai_log_events",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("event_key", sa.String(64), nullable=False),
        sa.Column("event", JSONType, nullable=False),
        sa.Column("received_unix_nano", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant", "trace_id", "span_id", "event_key", name="pk_gen_ai_log_events"
        ),
    )
    op.create_index(
        "ix_gen_ai_log_events_received", "gen_ai_log_events", ["tenant", "received_unix_nano"]
    )


def downgrade() -> None:
    op.drop_index("ix_gen_ai_log_events_received", table_name="gen_ai_log_events")
    op.drop_table("gen_ai_log_events")
