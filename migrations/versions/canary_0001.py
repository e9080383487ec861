"""canary rollouts, rollout decisions (audit log), manual overrides

Revision ID: canary_0001
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "canary_0001"
down_revision = "0003"
branch_labels = ("canary",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "rollouts",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("baseline_variant", sa.String(256), nullable=False),
        sa.Column("candidate_variant", sa.String(256), nullable=False),
        sa.Column("policy", JSONType, nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("candidate_weight_pct", sa.Float(), nullable=False),
        sa.Column("baseline_weight_pct", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("steps", JSONType, nullable=False),
        sa.Column("started_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_evaluated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_action", sa.String(16), nullable=True),
        sa.Column("last_reasons", JSONType, nullable=True),
        sa.Column("last_evidence", JSONType, nullable=True),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("tenant", "name", name="pk_rollouts"),
    )
    op.create_index("ix_rollouts_status", "rollouts", ["status"])
    op.create_table(
        "rollout_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("rollout", sa.String(256), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("step_before", sa.Integer(), nullable=False),
        sa.Column("step_after", sa.Integer(), nullable=False),
        sa.Column("status_before", sa.String(16), nullable=False),
        sa.Column("status_after", sa.String(16), nullable=False),
        sa.Column("candidate_weight_before", sa.Float(), nullable=False),
        sa.Column("candidate_weight_after", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("reasons", JSONType, nullable=False),
        sa.Column("evidence", JSONType, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_rollout_decisions"),
    )
    op.create_index(
        "ix_rollout_decisions_rollout", "rollout_decisions", ["tenant", "rollout", "decided_at"]
    )
    op.create_table(
        "rollout_overrides",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("rollout", sa.String(256), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_rollout_overrides"),
    )
    op.create_index(
        "ix_rollout_overrides_rollout", "rollout_overrides", ["tenant", "rollout", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_rollout_overrides_rollout", table_name="rollout_overrides")
    op.drop_table("rollout_overrides")
    op.drop_index("ix_rollout_decisions_rollout", table_name="rollout_decisions")
    op.drop_table("rollout_decisions")
    op.drop_index("ix_rollouts_status", table_name="rollouts")
    op.drop_table("rollouts")
