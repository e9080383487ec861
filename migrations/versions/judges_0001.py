"""judges: cursors, samples, results, pairwise results, review items, human labels

Revision ID: judges_0001
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "judges_0001"
down_revision = "0003"
branch_labels = ("judges",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts(name: str, nullable: bool) -> sa.Column[dt.datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "judge_cursors",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("received_unix_nano", sa.BigInteger(), nullable=False),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("tenant", name="pk_judge_cursors"),
    )
    op.create_table(
        "judge_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("call_id", sa.String(512), nullable=False),
        sa.Column("rubric", sa.String(64), nullable=False),
        sa.Column("inclusion_probability", sa.Float(), nullable=False),
        sa.Column("design_rate", sa.Float(), nullable=False),
        sa.Column("stratum", sa.String(256), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("audit_probability", sa.Float(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        _ts("lease_expires_at", True),
        _ts("created_at", False),
        _ts("updated_at", False),
        sa.PrimaryKeyConstraint("id", name="pk_judge_samples"),
        sa.UniqueConstraint(
            "tenant", "trace_id", "span_id", "rubric", name="uq_judge_samples_call"
        ),
    )
    op.create_index("ix_judge_samples_status", "judge_samples", ["tenant", "status", "id"])
    op.create_index("ix_judge_samples_created", "judge_samples", ["tenant", "created_at"])
    op.create_table(
        "judge_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sample_id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("call_id", sa.String(512), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rubric_name", sa.String(64), nullable=False),
        sa.Column("rubric_version", sa.String(32), nullable=False),
        sa.Column("rubric_fingerprint", sa.String(32), nullable=False),
        sa.Column("judge_model", sa.String(256), nullable=False),
        sa.Column("response_model", sa.String(256), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("discrete_score", sa.Integer(), nullable=True),
        sa.Column("weighted_score", sa.Float(), nullable=True),
        sa.Column("score_probabilities", JSONType, nullable=True),
        sa.Column("label", sa.String(64), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("output_mode", sa.String(16), nullable=True),
        sa.Column("logprobs_used", sa.Boolean(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=True),
        sa.Column("elapsed_s", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("error_kind", sa.String(16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("raw_text", sa.Text(), nullable=True),
        _ts("created_at", False),
        sa.PrimaryKeyConstraint("id", name="pk_judge_results"),
        sa.ForeignKeyConstraint(
            ["sample_id"],
            ["judge_samples.id"],
            name="fk_judge_results_sample_id_judge_samples",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_judge_results_sample", "judge_results", ["sample_id"])
    op.create_index("ix_judge_results_created", "judge_results", ["tenant", "created_at"])
    op.create_index("ix_judge_results_call", "judge_results", ["tenant", "trace_id", "span_id"])
    op.create_table(
        "judge_pairwise_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("rollout", sa.String(256), nullable=False),
        sa.Column("baseline_trace_id", sa.String(32), nullable=False),
        sa.Column("baseline_span_id", sa.String(16), nullable=False),
        sa.Column("candidate_trace_id", sa.String(32), nullable=False),
        sa.Column("candidate_span_id", sa.String(16), nullable=False),
        sa.Column("rubric_name", sa.String(64), nullable=False),
        sa.Column("rubric_version", sa.String(32), nullable=False),
        sa.Column("rubric_fingerprint", sa.String(32), nullable=False),
        sa.Column("judge_model", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("consistent", sa.Boolean(), nullable=True),
        sa.Column("judgements", JSONType, nullable=True),
        sa.Column("elapsed_s", sa.Float(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", False),
        sa.PrimaryKeyConstraint("id", name="pk_judge_pairwise_results"),
        sa.UniqueConstraint(
            "tenant",
            "candidate_trace_id",
            "candidate_span_id",
            "rubric_name",
            name="uq_judge_pairwise_results_candidate",
        ),
    )
    op.create_index(
        "ix_judge_pairwise_results_rollout",
        "judge_pairwise_results",
        ["tenant", "rollout", "created_at"],
    )
    op.create_table(
        "review_items",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("sample_id", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("call_id", sa.String(512), nullable=False),
        sa.Column("rubric", sa.String(64), nullable=False),
        sa.Column("audit", sa.Boolean(), nullable=False),
        sa.Column("inclusion_probability", sa.Float(), nullable=True),
        sa.Column("stratum", sa.String(256), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        _ts("lease_expires_at", True),
        _ts("created_at", False),
        _ts("labelled_at", True),
        sa.PrimaryKeyConstraint("id", name="pk_review_items"),
        sa.UniqueConstraint("sample_id", name="uq_review_items_sample_id"),
        sa.ForeignKeyConstraint(
            ["sample_id"],
            ["judge_samples.id"],
            name="fk_review_items_sample_id_judge_samples",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_review_items_queue", "review_items", ["tenant", "status", "audit", "id"])
    op.create_table(
        "human_labels",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("review_item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(128), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("label", sa.String(64), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("corrected_output", sa.Text(), nullable=True),
        sa.Column("skipped", sa.Boolean(), nullable=False),
        _ts("created_at", False),
        sa.PrimaryKeyConstraint("id", name="pk_human_labels"),
        sa.ForeignKeyConstraint(
            ["review_item_id"],
            ["review_items.id"],
            name="fk_human_labels_review_item_id_review_items",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_human_labels_item", "human_labels", ["review_item_id", "created_at"])


def downgrade() -> None:
    op.drop_table("human_labels")
    op.drop_table("review_items")
    op.drop_table("judge_pairwise_results")
    op.drop_table("judge_results")
    op.drop_table("judge_samples")
    op.drop_table("judge_cursors")
