"""Tables of alerting (collector/alerts): rules, receivers, alerts, groups, silences, outbox,
and the inbox of events (drift, canary, judges, collector health) fed to event rules."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime

# Rules, alert state, notification groups, silences, receivers and the webhook outbox
# (collector/alerts). Times are tz-aware UTC; NULL means "not yet" / unknown.


class AlertRule(Base):
    """An alert rule of a tenant; ``spec`` is the pydantic rule (alerts.rules) as JSON."""

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
    (``webhook-id``). ``status`` is ``pending``, ``delivered`` or ``failed``. ``seq`` is the
    notification's number within its group: rows of one (tenant, receiver, group) are delivered
    in ``seq`` order (NULL: no group order, e.g. test notifications).
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
    seq: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_alert_notifications_due", "status", "next_attempt_at"),
        Index("ix_alert_notifications_group", "tenant", "group_id"),
    )


class AlertEventRow(Base):
    """One event for event rules (``alerts.events.emit_event``): a durable inbox.

    ``kind`` is an ``EventKind`` (``drift_detected``, ``canary_rollback``, ...); ``occurred_at``
    is when it happened, ``consumed_at`` when an evaluation applied it (NULL: not yet), in
    the same transaction as the alert state it changed. ``resolved`` True clears the condition.
    """

    __tablename__ = "alert_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(64))
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType)
    annotations: Mapped[dict[str, Any]] = mapped_column(JSONType)
    value: Mapped[float | None] = mapped_column(Float)
    resolved: Mapped[bool] = mapped_column()
    occurred_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    consumed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_alert_events_inbox", "tenant", "consumed_at", "id"),)
