"""Persistence of rules, alert states, groups, silences and receivers.

Functions take a ``Session``; the caller owns the transaction (``with Session(engine) as s,
s.begin(): ...``) so a state change and the notification it causes commit together.
Times cross this boundary as unix seconds and are stored as UTC timestamps.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts.grouping import GroupState, Matcher, Silence
from alerts.outbox import to_dt, to_ts
from alerts.receivers import (
    RECEIVER_MAX_TIMEOUT_S,
    Receiver,
    StaticReceivers,
    allowed_headers,
)
from alerts.rules import EventRule, ThresholdRule, parse_rule
from alerts.state import AlertState, AlertStatus, acknowledge
from collector.errors import NotFoundError
from collector.store.models import (
    Alert,
    AlertGroup,
    AlertReceiver,
    AlertRule,
    AlertSilence,
)


def _dt(t: float | None) -> dt.datetime | None:
    return None if t is None else to_dt(t)


# --- rules ---


def save_rule(
    session: Session, tenant: str, rule: ThresholdRule | EventRule, *, enabled: bool, now: float
) -> None:
    """Insert or replace the rule ``rule.name`` of ``tenant``."""
    row = session.get(AlertRule, (tenant, rule.name))
    spec = rule.model_dump(mode="json")
    if row is None:
        session.add(
            AlertRule(
                tenant=tenant,
                name=rule.name,
                spec=spec,
                enabled=enabled,
                created_at=to_dt(now),
                updated_at=to_dt(now),
            )
        )
    else:
        row.spec, row.enabled, row.updated_at = spec, enabled, to_dt(now)


def load_rules(session: Session, tenant: str) -> list[ThresholdRule | EventRule]:
    """Enabled rules of ``tenant``, sorted by name."""
    rows = session.scalars(
        select(AlertRule)
        .where(AlertRule.tenant == tenant, AlertRule.enabled.is_(True))
        .order_by(AlertRule.name)
    ).all()
    return [parse_rule(r.spec) for r in rows]


# --- alerts ---


def alert_state_of_row(r: Alert) -> AlertState:
    """The :class:`AlertState` stored in one ``alerts`` row."""
    return AlertState(
        fingerprint=r.fingerprint,
        rule=r.rule,
        labels=dict(r.labels),
        status=AlertStatus(r.status),
        annotations=dict(r.annotations),
        active_since=to_ts(r.active_since),
        fired_at=to_ts(r.fired_at),
        resolved_at=to_ts(r.resolved_at),
        clear_since=to_ts(r.clear_since),
        last_breach_at=to_ts(r.last_breach_at),
        last_evaluated_at=to_ts(r.last_evaluated_at),
        last_value=r.last_value,
        acked_at=to_ts(r.acked_at),
        acked_by=r.acked_by,
    )


def load_alerts(session: Session, tenant: str, *, rule: str | None = None) -> dict[str, AlertState]:
    """``{fingerprint: state}`` of ``tenant`` (optionally of one rule)."""
    q = select(Alert).where(Alert.tenant == tenant)
    if rule is not None:
        q = q.where(Alert.rule == rule)
    return {r.fingerprint: alert_state_of_row(r) for r in session.scalars(q).all()}


def save_alerts(session: Session, tenant: str, states: Iterable[AlertState], now: float) -> None:
    """Insert or update alert states (keyed by fingerprint)."""
    for a in states:
        row = session.get(Alert, (tenant, a.fingerprint))
        if row is None:
            row = Alert(tenant=tenant, fingerprint=a.fingerprint)
            session.add(row)
        row.rule, row.labels, row.annotations = a.rule, dict(a.labels), dict(a.annotations)
        row.status = a.status.value
        row.active_since, row.fired_at = _dt(a.active_since), _dt(a.fired_at)
        row.resolved_at, row.clear_since = _dt(a.resolved_at), _dt(a.clear_since)
        row.last_breach_at, row.last_evaluated_at = _dt(a.last_breach_at), _dt(a.last_evaluated_at)
        row.last_value, row.acked_at, row.acked_by = a.last_value, _dt(a.acked_at), a.acked_by
        row.updated_at = to_dt(now)


def acknowledge_alert(
    session: Session, tenant: str, fingerprint: str, *, by: str, now: float
) -> AlertState:
    """Acknowledge a firing alert (stops its repeat notifications until it resolves).

    Raises:
        NotFoundError: no such alert; ValueError: not firing, or ``by`` empty.
    """
    row = session.get(Alert, (tenant, fingerprint))
    if row is None:
        raise NotFoundError(f"alert {fingerprint!r} not found")
    state = acknowledge(alert_state_of_row(row), now, by)
    save_alerts(session, tenant, [state], now)
    return state


# --- groups ---


def load_group(session: Session, tenant: str, empty: GroupState) -> GroupState:
    """The stored state of ``empty.group_id`` or ``empty`` itself when never stored."""
    r = session.get(AlertGroup, (tenant, empty.group_id))
    if r is None:
        return empty
    return GroupState(
        group_id=r.group_id,
        group_key=r.group_key,
        receiver=r.receiver,
        group_labels=dict(r.group_labels),
        episode_started_at=to_ts(r.episode_started_at),
        last_flush_at=to_ts(r.last_flush_at),
        last_sent_firing=frozenset(r.last_sent_firing),
        seq=r.seq,
    )


def save_group(session: Session, tenant: str, g: GroupState, now: float) -> None:
    """Insert or update one group's notification state."""
    r = session.get(AlertGroup, (tenant, g.group_id))
    if r is None:
        r = AlertGroup(tenant=tenant, group_id=g.group_id)
        session.add(r)
    r.group_key, r.receiver, r.group_labels = g.group_key, g.receiver, dict(g.group_labels)
    r.episode_started_at, r.last_flush_at = _dt(g.episode_started_at), _dt(g.last_flush_at)
    r.last_sent_firing, r.seq, r.updated_at = sorted(g.last_sent_firing), g.seq, to_dt(now)


# --- silences ---


def silence_of_row(r: AlertSilence) -> Silence:
    """The :class:`Silence` stored in one ``alert_silences`` row."""
    return Silence(
        id=r.id,
        matchers=tuple(Matcher(m["name"], m["value"], m.get("op", "=")) for m in r.matchers),
        starts_at=r.starts_at.timestamp(),
        ends_at=r.ends_at.timestamp(),
        created_by=r.created_by,
        comment=r.comment,
    )


def create_silence(
    session: Session,
    tenant: str,
    matchers: Sequence[Matcher],
    *,
    starts_at: float,
    ends_at: float,
    now: float,
    created_by: str | None = None,
    comment: str | None = None,
) -> Silence:
    """Store a new silence (id ``sil_<hex>``); validation as in :class:`Silence` (ValueError)."""
    s = Silence(
        id="sil_" + uuid.uuid4().hex,
        matchers=tuple(matchers),
        starts_at=starts_at,
        ends_at=ends_at,
        created_by=created_by,
        comment=comment,
    )
    session.add(
        AlertSilence(
            tenant=tenant,
            id=s.id,
            matchers=[{"name": m.name, "value": m.value, "op": m.op} for m in s.matchers],
            starts_at=to_dt(starts_at),
            ends_at=to_dt(ends_at),
            created_by=created_by,
            comment=comment,
            created_at=to_dt(now),
        )
    )
    return s


def expire_silence(session: Session, tenant: str, silence_id: str, *, now: float) -> None:
    """End a silence at ``now`` (kept for history).

    Raises:
        NotFoundError: no such silence for ``tenant``.
    """
    r = session.get(AlertSilence, (tenant, silence_id))
    if r is None:
        raise NotFoundError(f"silence {silence_id!r} not found")
    if r.ends_at.timestamp() > now:
        r.ends_at = to_dt(max(now, r.starts_at.timestamp() + 1e-6))


def active_silences(session: Session, tenant: str, now: float) -> list[Silence]:
    """Silences of ``tenant`` in effect at ``now``."""
    rows = session.scalars(
        select(AlertSilence).where(
            AlertSilence.tenant == tenant,
            AlertSilence.starts_at <= to_dt(now),
            AlertSilence.ends_at > to_dt(now),
        )
    ).all()
    return [silence_of_row(r) for r in rows]


# --- receivers ---


def save_receiver(session: Session, r: Receiver, *, now: float) -> None:
    """Insert or replace receiver ``r`` (table ``alert_receivers``)."""
    row = session.get(AlertReceiver, (r.tenant, r.name))
    if row is None:
        row = AlertReceiver(tenant=r.tenant, name=r.name, created_at=to_dt(now))
        session.add(row)
    row.kind, row.url, row.send_resolved = r.kind, r.url, r.send_resolved
    row.secret = r.secret.get_secret_value() if r.secret else None
    row.config = {
        "routing_key": r.routing_key.get_secret_value() if r.routing_key else None,
        "max_alerts": r.max_alerts,
        "timeout_s": r.timeout_s,
        "headers": dict(r.headers),
        "previous_secret": r.previous_secret.get_secret_value() if r.previous_secret else None,
        "previous_secret_until": r.previous_secret_until,
    }
    row.updated_at = to_dt(now)


def _stored_timeout(value: Any) -> float | None:
    """A stored ``timeout_s`` cut to (0, RECEIVER_MAX_TIMEOUT_S] (rows written before the bound
    may hold 1e300); anything else is None (the worker's default)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    t = float(value)
    return min(t, RECEIVER_MAX_TIMEOUT_S) if math.isfinite(t) and t > 0 else None


def receiver_of_row(row: AlertReceiver) -> Receiver:
    """The :class:`Receiver` stored in one ``alert_receivers`` row."""
    cfg = row.config or {}
    return Receiver.model_validate(
        {
            "name": row.name,
            "tenant": row.tenant,
            "kind": row.kind,
            "url": row.url,
            "secret": row.secret,
            "previous_secret": cfg.get("previous_secret"),
            "previous_secret_until": cfg.get("previous_secret_until"),
            "send_resolved": row.send_resolved,
            "routing_key": cfg.get("routing_key"),
            "max_alerts": cfg.get("max_alerts", 0),
            "timeout_s": _stored_timeout(cfg.get("timeout_s")),
            "headers": allowed_headers(cfg.get("headers") or {}),
        }
    )


def load_db_receiver(session: Session, tenant: str, name: str) -> Receiver | None:
    """Receiver ``name`` of ``tenant`` from ``alert_receivers``, or None."""
    row = session.get(AlertReceiver, (tenant, name))
    return None if row is None else receiver_of_row(row)


def load_db_receivers(session: Session, tenant: str | None = None) -> StaticReceivers:
    """Receivers in ``alert_receivers`` (one tenant, or all) as a directory."""
    q = select(AlertReceiver).order_by(AlertReceiver.tenant, AlertReceiver.name)
    if tenant is not None:
        q = q.where(AlertReceiver.tenant == tenant)
    return StaticReceivers(receiver_of_row(row) for row in session.scalars(q).all())
