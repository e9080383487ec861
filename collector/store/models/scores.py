"""Scores from outside: ``POST /api/v1/scores`` and OpenTelemetry ``gen_ai.evaluation.result``
events (``source`` tells them apart). They sit beside the judge results (``judge_results``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime


class ExternalScore(Base):
    """One score of a call or trace. ``score_id`` is the sender's idempotency key.

    ``data_type``: ``numeric`` | ``categorical`` | ``boolean``; ``value`` (float, NULL for a
    categorical score without a numeric value) and ``label`` follow the score config.
    ``source``: ``api`` | ``otel_event`` | ...; ``evaluator``: who scored (a model, a
    person, a tool). ``response_id`` links a ``gen_ai.evaluation.result`` event to its call.
    """

    __tablename__ = "external_scores"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    score_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    trace_id: Mapped[str | None] = mapped_column(String(32))
    span_id: Mapped[str | None] = mapped_column(String(16))
    response_id: Mapped[str | None] = mapped_column(String(512))
    session_id: Mapped[str | None] = mapped_column(String(256))
    name: Mapped[str] = mapped_column(String(128))
    data_type: Mapped[str] = mapped_column(String(16))
    value: Mapped[float | None] = mapped_column(Float)
    label: Mapped[str | None] = mapped_column(String(128))
    comment: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(32))
    evaluator: Mapped[str | None] = mapped_column(String(256))
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONType)
    timestamp_unix_nano: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (
        Index("ix_external_scores_trace", "tenant", "trace_id", "span_id"),
        Index("ix_external_scores_name", "tenant", "name", "timestamp_unix_nano"),
        Index("ix_external_scores_response", "tenant", "response_id"),
    )
