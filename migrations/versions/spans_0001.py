"""spans: drop ix_spans_parent (tenant, trace_id, parent_span_id), which no query needs

No statement filters or sorts spans by ``parent_span_id`` (the trace tree is built in Python
from all of a trace's spans); the statements that read spans by (tenant, trace_id) use the
primary key's index, which has the same leading columns. Every span insert paid for the index:
~4 us of the SQLite writer's CPU per span.

Revision ID: spans_0001
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "spans_0001"
down_revision = "0003"
branch_labels = ("spans",)
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_spans_parent", table_name="spans")


def downgrade() -> None:
    op.create_index("ix_spans_parent", "spans", ["tenant", "trace_id", "parent_span_id"])
