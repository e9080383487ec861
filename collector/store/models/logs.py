"""Tables of OTLP log records that driftline keeps: gen_ai content events of spans, and
evaluation results reported by instrumentations (``gen_ai.evaluation.result``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base
from collector.store.types import JSONType


class GenAILogEvent(Base):
    """A gen_ai content log record (after the capture policy), laid over its span whenever the
    span is written (a span re-sent after the join keeps its content). ``event`` is the record
    in span-event form ``{name, time_unix_nano, attributes}`` (the body's fields among the
    attributes); ``event_key`` is its digest, so a re-sent record upserts. ``redactions``: the
    PII redactions the capture policy made in it (NULL: not scanned); ``counted``: its
    redactions are in its call record's ``redactions`` (set when a write joins it)."""

    __tablename__ = "gen_ai_log_events"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    event_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    event: Mapped[dict[str, Any]] = mapped_column(JSONType)
    received_unix_nano: Mapped[int] = mapped_column(BigInteger)
    redactions: Mapped[int | None] = mapped_column(Integer)
    counted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (Index("ix_gen_ai_log_events_received", "tenant", "received_unix_nano"),)
