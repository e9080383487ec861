"""The durable event inbox (table ``alert_events``) that feeds event rules.

Producers (drift monitor, canary decisions, judge drift, the collector's health checks) call
:func:`emit_event`; it commits one row at once, so an event survives a restart before the next
evaluation. The alert evaluation job reads a tenant's unconsumed events with
:func:`pending_events` and marks them with :func:`mark_consumed` in the same transaction as the
alert states they change: each event is applied once (at-least-once if two evaluators race; the
state machine ignores replays older than an alert's last evaluation).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import get_args

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from collector.alerts.outbox import to_dt
from collector.alerts.rules import AlertEvent, EventKind
from collector.store.models.alerts import AlertEventRow

EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


def _labels(value: Mapping[str, str] | None, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a mapping of str to str")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"{name} keys must be non-empty strings, got {k!r}")
        out[k] = str(v)
    return out


def emit_event(
    engine: Engine,
    tenant: str,
    kind: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    at: float | None = None,
    *,
    value: float | None = None,
    resolved: bool = False,
) -> int:
    """Record one event for the event rules of ``tenant``; commits and returns its id.

    Args:
        engine: the store.
        tenant: tenant the event belongs to (e.g. the rollout's tenant).
        kind: one of ``drift_detected``, ``canary_rollback``, ``canary_promote``,
            ``canary_inconclusive``, ``judge_drift``, ``collector_unhealthy``.
        labels: identify the subject (``rollout``, ``signal``, ``segment``, ``model``...); event
            rules match on them and they become the alert's labels (one alert per label set).
        annotations: human context copied to the alert (``reason``, ``evidence``...).
        at: when it happened, unix seconds (None: now).
        value: the measured value, if any (e.g. an e-value or a p-value), in its own unit.
        resolved: True when the condition has cleared (resolves the matching alert).

    Raises:
        ValueError: unknown ``kind``, empty ``tenant``, non-finite ``at``/``value``, or
            labels/annotations that are not a str mapping (the message names the parameter).
    """
    if not tenant:
        raise ValueError("tenant must be a non-empty string")
    if kind not in EVENT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(EVENT_KINDS)}; got {kind!r}")
    when = time.time() if at is None else at
    if not math.isfinite(when):
        raise ValueError(f"at must be finite unix seconds, got {at!r}")
    if value is not None and not math.isfinite(value):
        raise ValueError(f"value must be finite or None, got {value!r}")
    row = AlertEventRow(
        tenant=tenant,
        kind=kind,
        labels=_labels(labels, "labels"),
        annotations=_labels(annotations, "annotations"),
        value=value,
        resolved=bool(resolved),
        occurred_at=to_dt(when),
        created_at=to_dt(time.time()),
    )
    with Session(engine) as s, s.begin():
        s.add(row)
        s.flush()
        return int(row.id)


def pending_events(
    session: Session, tenant: str, *, until: float | None = None, limit: int = 10_000
) -> list[tuple[int, AlertEvent]]:
    """Unconsumed events of ``tenant`` that happened by ``until`` (unix seconds; None: any),
    oldest first, as ``(id, AlertEvent)``. Later ones stay for a later evaluation.

    On PostgreSQL the rows are locked ``FOR UPDATE SKIP LOCKED`` until the caller's transaction
    ends, so two collector replicas never apply the same event. Raises ValueError if
    ``limit`` < 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    q = (
        select(AlertEventRow)
        .where(AlertEventRow.tenant == tenant, AlertEventRow.consumed_at.is_(None))
        .order_by(AlertEventRow.id)
        .limit(limit)
    )
    if until is not None:
        q = q.where(AlertEventRow.occurred_at <= to_dt(until))
    if session.get_bind().dialect.name == "postgresql":
        q = q.with_for_update(skip_locked=True)
    out = []
    for r in session.scalars(q).all():
        out.append(
            (
                r.id,
                AlertEvent(
                    kind=r.kind,  # type: ignore[arg-type]  # validated by emit_event
                    at=r.occurred_at.timestamp(),
                    labels=dict(r.labels),
                    annotations=dict(r.annotations),
                    value=r.value,
                    resolved=r.resolved,
                ),
            )
        )
    return out


def tenants_with_events(session: Session) -> list[str]:
    """Tenants that have unconsumed events, sorted."""
    rows = session.scalars(
        select(AlertEventRow.tenant).where(AlertEventRow.consumed_at.is_(None)).distinct()
    ).all()
    return sorted(rows)


def mark_consumed(session: Session, ids: Sequence[int], now: float) -> None:
    """Stamp events ``ids`` as applied at ``now`` (unix seconds); the caller commits."""
    if not ids:
        return
    session.execute(
        update(AlertEventRow)
        .where(AlertEventRow.id.in_(list(ids)))
        .values(consumed_at=to_dt(now))
        .execution_options(synchronize_session=False)
    )
