"""Tables of driftline. The only module that defines tables (one ``Base``).

Times of telemetry are exact integers (``*_unix_nano``, UTC); durations are float seconds,
money float USD, token counts ints. ``NULL`` always means unknown, never 0.
Migrations in ``migrations/versions`` mirror these definitions (a test compares them).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime

#: the most characters of ``llm_calls.service_name`` kept (it is in a btree index, whose rows
#: PostgreSQL caps at 2,704 bytes: a 6,000-character name failed the whole batch). A longer
#: name is cut to this many characters, the last being :data:`CUT_MARKER`, on every store.
SERVICE_NAME_MAX_CHARS = 256
#: the character that ends a value cut to its column's bound (``info["cut_marker"]``)
CUT_MARKER = "\u2026"


class Span(Base):
    """Every span received, LLM or not, with its raw attributes (idempotent on the key)."""

    __tablename__ = "spans"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    parent_span_id: Mapped[str | None] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[int] = mapped_column(Integer)
    service_name: Mapped[str | None] = mapped_column(Text)
    scope_name: Mapped[str | None] = mapped_column(Text)
    scope_version: Mapped[str | None] = mapped_column(Text)
    start_unix_nano: Mapped[int] = mapped_column(BigInteger)
    end_unix_nano: Mapped[int] = mapped_column(BigInteger)
    status_code: Mapped[int] = mapped_column(Integer)
    status_message: Mapped[str | None] = mapped_column(Text)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONType)
    resource_attributes: Mapped[dict[str, Any]] = mapped_column(JSONType)
    events: Mapped[list[Any]] = mapped_column(JSONType)
    links: Mapped[list[Any]] = mapped_column(JSONType)
    #: ``client`` (an LLM call seen by its caller), ``engine`` (vLLM ``llm_request``) or NULL.
    llm_role: Mapped[str | None] = mapped_column(String(16))
    received_unix_nano: Mapped[int] = mapped_column(BigInteger)

    # no index on parent_span_id: no query filters by it (the trace tree is built in Python);
    # reads by (tenant, trace_id) use the primary key (migration spans_0001)
    __table_args__ = (Index("ix_spans_start", "tenant", "start_unix_nano"),)


class LLMCall(Base):
    """The canonical LLM-call record (see DESIGN.md), one row per LLM request.

    Keyed by the primary span: the caller's span when a gateway/client span and its vLLM
    ``llm_request`` child merged (``engine_span_id`` then names the child).
    """

    __tablename__ = "llm_calls"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    span_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    call_id: Mapped[str] = mapped_column(String(512))
    parent_span_id: Mapped[str | None] = mapped_column(String(16))
    engine_span_id: Mapped[str | None] = mapped_column(String(16))
    # Text (no DDL length, so no migration): bounded by the writer, collector/store/bulk.py
    service_name: Mapped[str | None] = mapped_column(
        Text, info={"max_chars": SERVICE_NAME_MAX_CHARS, "cut_marker": CUT_MARKER}
    )
    operation: Mapped[str | None] = mapped_column(String(64))
    provider: Mapped[str | None] = mapped_column(String(128))
    request_model: Mapped[str | None] = mapped_column(Text)
    response_model: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(256))
    rollout: Mapped[str | None] = mapped_column(String(256))
    variant: Mapped[str | None] = mapped_column(String(256))
    user_id: Mapped[str | None] = mapped_column(String(256))
    session_id: Mapped[str | None] = mapped_column(String(256))
    response_id: Mapped[str | None] = mapped_column(String(512))
    server_request_id: Mapped[str | None] = mapped_column(String(512))
    start_unix_nano: Mapped[int | None] = mapped_column(BigInteger)
    end_unix_nano: Mapped[int | None] = mapped_column(BigInteger)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cached_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    queue_s: Mapped[float | None] = mapped_column(Float)
    prefill_s: Mapped[float | None] = mapped_column(Float)
    decode_s: Mapped[float | None] = mapped_column(Float)
    inference_s: Mapped[float | None] = mapped_column(Float)
    ttft_s: Mapped[float | None] = mapped_column(Float)
    e2e_s: Mapped[float | None] = mapped_column(Float)
    tpot_s: Mapped[float | None] = mapped_column(Float)
    itl_p50_s: Mapped[float | None] = mapped_column(Float)
    itl_p95_s: Mapped[float | None] = mapped_column(Float)
    itl_max_s: Mapped[float | None] = mapped_column(Float)
    finish_reasons: Mapped[list[Any] | None] = mapped_column(JSONType)
    finish_reason: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    error_type: Mapped[str | None] = mapped_column(Text)
    flags: Mapped[list[Any]] = mapped_column(JSONType)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    gpu_cost_usd: Mapped[float | None] = mapped_column(Float)
    input_text: Mapped[str | None] = mapped_column(Text)
    output_text: Mapped[str | None] = mapped_column(Text)
    dialect: Mapped[str] = mapped_column(String(32))
    #: PII redactions applied to this call's captured content (NULL: not scanned).
    redactions: Mapped[int | None] = mapped_column(Integer)
    #: the engine's TTFT / e2e (seconds) next to the caller's ``ttft_s`` / ``e2e_s``
    server_ttft_s: Mapped[float | None] = mapped_column(Float)
    server_e2e_s: Mapped[float | None] = mapped_column(Float)
    #: seconds the gateway queued the request before an engine slot
    gateway_queue_s: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        Index("ix_llm_calls_call_id", "tenant", "call_id"),
        Index("ix_llm_calls_start", "tenant", "start_unix_nano"),
        Index("ix_llm_calls_model", "tenant", "model", "start_unix_nano"),
        Index("ix_llm_calls_variant", "tenant", "variant", "start_unix_nano"),
        Index("ix_llm_calls_service", "tenant", "service_name", "start_unix_nano"),
    )


class Tenant(Base):
    """A tenant; rows of every other table carry its name. ``default`` exists in --dev mode."""

    __tablename__ = "tenants"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    #: ``none`` | ``redacted`` | ``full``: what of prompts/answers is stored.
    capture_content: Mapped[str] = mapped_column(String(16), default="redacted")
    #: calls and spans older than this are deleted by ``driftline retention apply``.
    retention_days: Mapped[int] = mapped_column(Integer, default=30)
