"""calls: server-side TTFT / e2e and gateway queue time on llm_calls; tenants a gateway key may
speak for (api_keys.tenants); per-replica GPU cost on engine_samples

Revision ID: calls_0001
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "calls_0001"
down_revision = "0003"
branch_labels = ("calls",)
depends_on = None

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("server_ttft_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("server_e2e_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("gateway_queue_s", sa.Float(), nullable=True))
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("tenants", JSONType, nullable=True))
    with op.batch_alter_table("engine_samples") as batch:
        batch.add_column(sa.Column("gpu_cost_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("engine_samples") as batch:
        batch.drop_column("gpu_cost_usd")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("tenants")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("gateway_queue_s")
        batch.drop_column("server_e2e_s")
        batch.drop_column("server_ttft_s")
