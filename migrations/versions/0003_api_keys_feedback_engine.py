"""api keys, feedback, engine samples; tenant capture/retention policy; call redaction count

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("tenants") as b:
        b.add_column(
            sa.Column("capture_content", sa.String(16), nullable=False, server_default="redacted")
        )
        b.add_column(sa.Column("retention_days", sa.Integer(), nullable=False, server_default="30"))
    with op.batch_alter_table("llm_calls") as b:
        b.add_column(sa.Column("redactions", sa.Integer(), nullable=True))
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name="pk_api_keys"),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])
    op.create_table(
        "feedback",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("feedback_id", sa.String(128), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.Column("span_id", sa.String(16), nullable=True),
        sa.Column("response_id", sa.String(512), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("user_id", sa.String(256), nullable=True),
        sa.Column("source", sa.String(64), nullable=True),
        sa.Column("attributes", JSONType, nullable=False),
        sa.Column("timestamp_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant", "feedback_id", name="pk_feedback"),
    )
    op.create_index("ix_feedback_trace", "feedback", ["tenant", "trace_id"])
    op.create_index("ix_feedback_response", "feedback", ["tenant", "response_id"])
    op.create_index("ix_feedback_pending", "feedback", ["tenant", "linked_at"])
    op.create_table(
        "engine_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("engine_kind", sa.String(16), nullable=False),
        sa.Column("model_name", sa.Text(), nullable=True),
        sa.Column("engine_index", sa.String(32), nullable=True),
        sa.Column("scraped_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("kv_cache_usage", sa.Float(), nullable=True),
        sa.Column("requests_running", sa.Integer(), nullable=True),
        sa.Column("requests_waiting", sa.Integer(), nullable=True),
        sa.Column("prefix_cache_queries_total", sa.BigInteger(), nullable=True),
        sa.Column("prefix_cache_hits_total", sa.BigInteger(), nullable=True),
        sa.Column("spec_decode_draft_tokens_total", sa.BigInteger(), nullable=True),
        sa.Column("spec_decode_accepted_tokens_total", sa.BigInteger(), nullable=True),
        sa.Column("preemptions_total", sa.BigInteger(), nullable=True),
        sa.Column("prompt_tokens_total", sa.BigInteger(), nullable=True),
        sa.Column("generation_tokens_total", sa.BigInteger(), nullable=True),
        sa.Column("prefix_cache_hit_rate", sa.Float(), nullable=True),
        sa.Column("spec_decode_acceptance_rate", sa.Float(), nullable=True),
        sa.Column("ttft_p95_s", sa.Float(), nullable=True),
        sa.Column("itl_p95_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_engine_samples"),
    )
    op.create_index("ix_engine_samples_time", "engine_samples", ["tenant", "scraped_unix_nano"])


def downgrade() -> None:
    op.drop_table("engine_samples")
    op.drop_table("feedback")
    op.drop_table("api_keys")
    with op.batch_alter_table("llm_calls") as b:
        b.drop_column("redactions")
    with op.batch_alter_table("tenants") as b:
        b.drop_column("retention_days")
        b.drop_column("capture_content")
