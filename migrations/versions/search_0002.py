"""scores: external_scores (scores sent from outside and gen_ai.evaluation.result events)

Revision ID: search_0002
Revises: search_0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "search_0002"
down_revision = "search_0001"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "external_scores",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("score_id", sa.String(128), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.Column("span_id", sa.String(16), nullable=True),
        sa.Column("response_id", sa.String(512), nullable=True),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("data_type", sa.String(16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("label", sa.String(128), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("evaluator", sa.String(256), nullable=True),
        sa.Column("attributes", JSONType, nullable=False),
        sa.Column("timestamp_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "score_id", name="pk_external_scores"),
    )
    op.create_index(
        "ix_external_scores_trace", "external_scores", ["tenant", "trace_id", "span_id"]
    )
    op.create_index(
        "ix_external_scores_name", "external_scores", ["tenant", "name", "timestamp_unix_nano"]
    )
    op.create_index("ix_external_scores_response", "external_scores", ["tenant", "response_id"])


def downgrade() -> None:
    op.drop_index("ix_external_scores_response", table_name="external_scores")
    op.drop_index("ix_external_scores_name", table_name="external_scores")
    op.drop_index("ix_external_scores_trace", table_name="external_scores")
    op.drop_table("external_scores")
