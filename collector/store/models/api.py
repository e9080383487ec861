"""Tables of the collector API: API keys, user feedback events, scraped engine samples."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime


class ApiKey(Base):
    """An API key: ``dl_<key_id>_<secret>``; only the SHA-256 of the secret is stored."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[str] = mapped_column(String(16))
    secret_sha256: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    #: role ``gateway`` only: the tenants this key may file spans under (``driftline.tenant``)
    tenants: Mapped[list[Any] | None] = mapped_column(JSONType)


class Feedback(Base):
    """One feedback event. ``trace_id``/``span_id`` are filled when the call is known
    (``linked_at``); until then it is pending and matched by trace id or response id."""

    __tablename__ = "feedback"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    feedback_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    trace_id: Mapped[str | None] = mapped_column(String(32))
    span_id: Mapped[str | None] = mapped_column(String(16))
    response_id: Mapped[str | None] = mapped_column(String(512))
    kind: Mapped[str] = mapped_column(String(32))
    value: Mapped[float | None] = mapped_column(Float)
    comment: Mapped[str | None] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(String(256))
    source: Mapped[str | None] = mapped_column(String(64))
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONType)
    timestamp_unix_nano: Mapped[int] = mapped_column(BigInteger)
    received_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    linked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_feedback_trace", "tenant", "trace_id"),
        Index("ix_feedback_response", "tenant", "response_id"),
        Index("ix_feedback_pending", "tenant", "linked_at"),
    )


class EngineSample(Base):
    """One scrape of an inference engine's ``/metrics`` (see collector.engines.scrape)."""

    __tablename__ = "engine_samples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(Text)
    engine_kind: Mapped[str] = mapped_column(String(16))
    model_name: Mapped[str | None] = mapped_column(Text)
    engine_index: Mapped[str | None] = mapped_column(String(32))
    scraped_unix_nano: Mapped[int] = mapped_column(BigInteger)
    kv_cache_usage: Mapped[float | None] = mapped_column(Float)
    requests_running: Mapped[int | None] = mapped_column(Integer)
    requests_waiting: Mapped[int | None] = mapped_column(Integer)
    prefix_cache_queries_total: Mapped[int | None] = mapped_column(BigInteger)
    prefix_cache_hits_total: Mapped[int | None] = mapped_column(BigInteger)
    spec_decode_draft_tokens_total: Mapped[int | None] = mapped_column(BigInteger)
    spec_decode_accepted_tokens_total: Mapped[int | None] = mapped_column(BigInteger)
    preemptions_total: Mapped[int | None] = mapped_column(BigInteger)
    prompt_tokens_total: Mapped[int | None] = mapped_column(BigInteger)
    generation_tokens_total: Mapped[int | None] = mapped_column(BigInteger)
    prefix_cache_hit_rate: Mapped[float | None] = mapped_column(Float)
    spec_decode_acceptance_rate: Mapped[float | None] = mapped_column(Float)
    ttft_p95_s: Mapped[float | None] = mapped_column(Float)
    itl_p95_s: Mapped[float | None] = mapped_column(Float)
    #: the replica's GPU cost (USD) over the interval since its previous sample
    gpu_cost_usd: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (Index("ix_engine_samples_time", "tenant", "scraped_unix_nano"),)
