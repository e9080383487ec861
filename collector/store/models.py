"""Tables of driftline. The only module that defines tables (one ``Base``).

Times of telemetry are exact integers (``*_unix_nano``, UTC); durations are float seconds,
money float USD, token counts ints. ``NULL`` always means unknown, never 0.
Migrations in ``migrations/versions`` mirror these definitions (a test compares them).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import BigInteger, Float, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from collector.store.types import JSONType, UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSONType,
        list[Any]: JSONType,
    }


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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

    __table_args__ = (
        Index("ix_spans_parent", "tenant", "trace_id", "parent_span_id"),
        Index("ix_spans_start", "tenant", "start_unix_nano"),
    )


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
    service_name: Mapped[str | None] = mapped_column(Text)
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


# --- alerts ---
# Rules, alert state, notification groups, silences, receivers and the webhook outbox
# (collector/alerts). Times are tz-aware UTC; NULL means "not yet" / unknown.


class AlertRule(Base):
    """An alert rule of a tenant; ``spec`` is the pydantic rule (collector.alerts.rules) as JSON."""

    __tablename__ = "alert_rules"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256), primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)
    enabled: Mapped[bool] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)


class AlertReceiver(Base):
    """A notification target (``alertmanager``, ``slack``, ``pagerduty`` or ``generic`` JSON).

    ``secret`` is the Standard Webhooks ``whsec_`` signing secret (NULL: unsigned); ``config``
    holds format-specific settings (PagerDuty ``routing_key``, extra headers, ``max_alerts``).
    """

    __tablename__ = "alert_receivers"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str | None] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    send_resolved: Mapped[bool] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)


class Alert(Base):
    """State of one alert instance: a (rule, label set), identified by its ``fingerprint``.

    ``status`` is ``inactive``, ``pending``, ``firing`` or ``resolved``.
    """

    __tablename__ = "alerts"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(32), primary_key=True)
    rule: Mapped[str] = mapped_column(String(256))
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType)
    annotations: Mapped[dict[str, Any]] = mapped_column(JSONType)
    status: Mapped[str] = mapped_column(String(16))
    active_since: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    fired_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    resolved_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    clear_since: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_breach_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_evaluated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_value: Mapped[float | None] = mapped_column(Float)
    acked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    acked_by: Mapped[str | None] = mapped_column(String(256))
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (
        Index("ix_alerts_rule", "tenant", "rule"),
        Index("ix_alerts_status", "tenant", "status"),
    )


class AlertGroup(Base):
    """Notification state of one alert group (receiver + ``group_by`` label values).

    ``last_sent_firing`` lists the fingerprints the receiver was last told are firing;
    ``seq`` counts notifications (it makes their ids deterministic).
    """

    __tablename__ = "alert_groups"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    group_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    group_key: Mapped[str] = mapped_column(Text)
    receiver: Mapped[str] = mapped_column(String(256))
    group_labels: Mapped[dict[str, Any]] = mapped_column(JSONType)
    episode_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_flush_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_sent_firing: Mapped[list[Any]] = mapped_column(JSONType)
    seq: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)


class AlertSilence(Base):
    """Mutes alerts whose labels match every matcher between ``starts_at`` and ``ends_at``."""

    __tablename__ = "alert_silences"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    matchers: Mapped[list[Any]] = mapped_column(JSONType)
    starts_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    ends_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str | None] = mapped_column(String(256))
    comment: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (Index("ix_alert_silences_ends", "tenant", "ends_at"),)


class AlertNotification(Base):
    """The durable webhook outbox: one row per notification, retried until delivered or failed.

    ``payload`` is the exact body sent on every attempt; ``id`` is the idempotency key
    (``webhook-id``). ``status`` is ``pending``, ``delivered`` or ``failed``.
    """

    __tablename__ = "alert_notifications"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    receiver: Mapped[str] = mapped_column(String(256))
    group_id: Mapped[str | None] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    payload: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_delay_s: Mapped[float | None] = mapped_column(Float)
    delivered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    failed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    failure_reason: Mapped[str | None] = mapped_column(String(32))

    __table_args__ = (
        Index("ix_alert_notifications_due", "status", "next_attempt_at"),
        Index("ix_alert_notifications_group", "tenant", "group_id"),
    )
