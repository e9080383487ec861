"""drift runs and drift results (per signal x segment, with histograms)

Revision ID: drift_0001
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "drift_0001"
down_revision = "0003"
branch_labels = ("drift",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts(name: str, nullable: bool) -> sa.Column[dt.datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _bigint(name: str) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "drift_runs",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("started_at", False),
        _ts("finished_at", True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("reference_kind", sa.String(16), nullable=False),
        sa.Column("reference_label", sa.Text(), nullable=True),
        _bigint("reference_start_unix_nano"),
        _bigint("reference_end_unix_nano"),
        _bigint("current_start_unix_nano"),
        _bigint("current_end_unix_nano"),
        sa.Column("n_reference_calls", sa.Integer(), nullable=True),
        sa.Column("n_current_calls", sa.Integer(), nullable=True),
        sa.Column("n_results", sa.Integer(), nullable=True),
        sa.Column("n_evaluated", sa.Integer(), nullable=True),
        sa.Column("n_drifted", sa.Integer(), nullable=True),
        sa.Column("drift_share", sa.Float(), nullable=True),
        sa.Column("dataset_drifted", sa.Boolean(), nullable=True),
        sa.Column("fdr_q", sa.Float(), nullable=True),
        sa.Column("config", JSONType, nullable=False),
        sa.Column("skipped", JSONType, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "run_id", name="pk_drift_runs"),
    )
    op.create_index("ix_drift_runs_started", "drift_runs", ["tenant", "started_at"])
    op.create_table(
        "drift_results",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("signal", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("segment", sa.Text(), nullable=True),
        sa.Column("segment_keys", JSONType, nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("score_kind", sa.String(16), nullable=False),
        sa.Column("statistic", sa.Float(), nullable=True),
        sa.Column("pvalue", sa.Float(), nullable=True),
        sa.Column("adjusted_pvalue", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("drifted", sa.Boolean(), nullable=True),
        sa.Column("unadjusted_drifted", sa.Boolean(), nullable=True),
        sa.Column("insufficient_data", sa.Boolean(), nullable=False),
        sa.Column("n_reference", sa.Integer(), nullable=False),
        sa.Column("n_current", sa.Integer(), nullable=False),
        sa.Column("n_reference_null", sa.Integer(), nullable=False),
        sa.Column("n_current_null", sa.Integer(), nullable=False),
        sa.Column("effect_size", sa.Float(), nullable=True),
        sa.Column("effect_kind", sa.String(32), nullable=True),
        sa.Column("psi", sa.Float(), nullable=True),
        sa.Column("reference_summary", JSONType, nullable=False),
        sa.Column("current_summary", JSONType, nullable=False),
        sa.Column("unseen_categories", JSONType, nullable=False),
        sa.Column("histogram", JSONType, nullable=True),
        sa.PrimaryKeyConstraint("tenant", "run_id", "seq", name="pk_drift_results"),
    )
    op.create_index("ix_drift_results_signal", "drift_results", ["tenant", "signal", "segment"])


def downgrade() -> None:
    op.drop_index("ix_drift_results_signal", table_name="drift_results")
    op.drop_table("drift_results")
    op.drop_index("ix_drift_runs_started", table_name="drift_runs")
    op.drop_table("drift_runs")
