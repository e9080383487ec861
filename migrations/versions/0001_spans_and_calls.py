"""spans, llm_calls and tenants

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_tenants"),
    )
    op.create_table(
        "spans",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("parent_span_id", sa.String(16), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("scope_name", sa.Text(), nullable=True),
        sa.Column("scope_version", sa.Text(), nullable=True),
        sa.Column("start_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("end_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("attributes", JSONType, nullable=False),
        sa.Column("resource_attributes", JSONType, nullable=False),
        sa.Column("events", JSONType, nullable=False),
        sa.Column("links", JSONType, nullable=False),
        sa.Column("llm_role", sa.String(16), nullable=True),
        sa.Column("received_unix_nano", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "trace_id", "span_id", name="pk_spans"),
    )
    op.create_index("ix_spans_parent", "spans", ["tenant", "trace_id", "parent_span_id"])
    op.create_index("ix_spans_start", "spans", ["tenant", "start_unix_nano"])
    op.create_table(
        "llm_calls",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("call_id", sa.String(512), nullable=False),
        sa.Column("parent_span_id", sa.String(16), nullable=True),
        sa.Column("engine_span_id", sa.String(16), nullable=True),
        sa.Column("service_name", sa.Text(), nullable=True),
        sa.Column("operation", sa.String(64), nullable=True),
        sa.Column("provider", sa.String(128), nullable=True),
        sa.Column("request_model", sa.Text(), nullable=True),
        sa.Column("response_model", sa.Text(), nullable=True),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("rollout", sa.String(256), nullable=True),
        sa.Column("variant", sa.String(256), nullable=True),
        sa.Column("user_id", sa.String(256), nullable=True),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("response_id", sa.String(512), nullable=True),
        sa.Column("server_request_id", sa.String(512), nullable=True),
        sa.Column("start_unix_nano", sa.BigInteger(), nullable=True),
        sa.Column("end_unix_nano", sa.BigInteger(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cached_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_write_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("reasoning_output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("queue_s", sa.Float(), nullable=True),
        sa.Column("prefill_s", sa.Float(), nullable=True),
        sa.Column("decode_s", sa.Float(), nullable=True),
        sa.Column("inference_s", sa.Float(), nullable=True),
        sa.Column("ttft_s", sa.Float(), nullable=True),
        sa.Column("e2e_s", sa.Float(), nullable=True),
        sa.Column("tpot_s", sa.Float(), nullable=True),
        sa.Column("itl_p50_s", sa.Float(), nullable=True),
        sa.Column("itl_p95_s", sa.Float(), nullable=True),
        sa.Column("itl_max_s", sa.Float(), nullable=True),
        sa.Column("finish_reasons", JSONType, nullable=True),
        sa.Column("finish_reason", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("flags", JSONType, nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("gpu_cost_usd", sa.Float(), nullable=True),
        sa.Column("input_text", sa.Text(), nullable=True),
        sa.Column("output_text", sa.Text(), nullable=True),
        sa.Column("dialect", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "trace_id", "span_id", name="pk_llm_calls"),
    )
    op.create_index("ix_llm_calls_call_id", "llm_calls", ["tenant", "call_id"])
    op.create_index("ix_llm_calls_start", "llm_calls", ["tenant", "start_unix_nano"])
    op.create_index("ix_llm_calls_model", "llm_calls", ["tenant", "model", "start_unix_nano"])
    op.create_index("ix_llm_calls_variant", "llm_calls", ["tenant", "variant", "start_unix_nano"])
    op.create_index(
        "ix_llm_calls_service", "llm_calls", ["tenant", "service_name", "start_unix_nano"]
    )


def downgrade() -> None:
    op.drop_table("llm_calls")
    op.drop_table("spans")
    op.drop_table("tenants")
