"""alert event inbox (alert_events) and per-group order of outbox notifications

Revision ID: alerts_0001
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "alerts_0001"
down_revision = "0003"
branch_labels = ("alerts",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts(name: str, nullable: bool) -> sa.Column[dt.datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("labels", JSONType, nullable=False),
        sa.Column("annotations", JSONType, nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("resolved", sa.Boolean(), nullable=False),
        _ts("occurred_at", False),
        _ts("created_at", False),
        _ts("consumed_at", True),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
    )
    op.create_index("ix_alert_events_inbox", "alert_events", ["tenant", "consumed_at", "id"])
    with op.batch_alter_table("alert_notifications") as batch:
        batch.add_column(sa.Column("seq", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alert_notifications") as batch:
        batch.drop_column("seq")
    op.drop_index("ix_alert_events_inbox", table_name="alert_events")
    op.drop_table("alert_events")
