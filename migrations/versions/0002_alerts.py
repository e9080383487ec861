"""alert rules, receivers, alerts, groups, silences and the notification outbox

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts(name: str, nullable: bool) -> sa.Column[dt.datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "alert_rules",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("spec", JSONType, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        _ts("created_at", False),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("tenant", "name", name="pk_alert_rules"),
    )
    op.create_table(
        "alert_receivers",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("config", JSONType, nullable=False),
        sa.Column("send_resolved", sa.Boolean(), nullable=False),
        _ts("created_at", False),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("tenant", "name", name="pk_alert_receivers"),
    )
    op.create_table(
        "alerts",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.String(32), nullable=False),
        sa.Column("rule", sa.String(256), nullable=False),
        sa.Column("labels", JSONType, nullable=False),
        sa.Column("annotations", JSONType, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _ts("active_since", True),
        _ts("fired_at", True),
        _ts("resolved_at", True),
        _ts("clear_since", True),
        _ts("last_breach_at", True),
        _ts("last_evaluated_at", True),
        sa.Column("last_value", sa.Float(), nullable=True),
        _ts("acked_at", True),
        sa.Column("acked_by", sa.String(256), nullable=True),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("tenant", "fingerprint", name="pk_alerts"),
    )
    op.create_index("ix_alerts_rule", "alerts", ["tenant", "rule"])
    op.create_index("ix_alerts_status", "alerts", ["tenant", "status"])
    op.create_table(
        "alert_groups",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("group_id", sa.String(64), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("receiver", sa.String(256), nullable=False),
        sa.Column("group_labels", JSONType, nullable=False),
        _ts("episode_started_at", True),
        _ts("last_flush_at", True),
        sa.Column("last_sent_firing", JSONType, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("tenant", "group_id", name="pk_alert_groups"),
    )
    op.create_table(
        "alert_silences",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("matchers", JSONType, nullable=False),
        _ts("starts_at", False),
        _ts("ends_at", False),
        sa.Column("created_by", sa.String(256), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        _ts("created_at", False),
        sa.PrimaryKeyConstraint("tenant", "id", name="pk_alert_silences"),
    )
    op.create_index("ix_alert_silences_ends", "alert_silences", ["tenant", "ends_at"])
    op.create_table(
        "alert_notifications",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("receiver", sa.String(256), nullable=False),
        sa.Column("group_id", sa.String(64), nullable=True),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _ts("created_at", False),
        _ts("next_attempt_at", False),
        _ts("last_attempt_at", True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_delay_s", sa.Float(), nullable=True),
        _ts("delivered_at", True),
        _ts("failed_at", True),
        sa.Column("failure_reason", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("tenant", "id", name="pk_alert_notifications"),
    )
    op.create_index(
        "ix_alert_notifications_due", "alert_notifications", ["status", "next_attempt_at"]
    )
    op.create_index("ix_alert_notifications_group", "alert_notifications", ["tenant", "group_id"])


def downgrade() -> None:
    op.drop_table("alert_notifications")
    op.drop_table("alert_silences")
    op.drop_table("alert_groups")
    op.drop_table("alerts")
    op.drop_table("alert_receivers")
    op.drop_table("alert_rules")
