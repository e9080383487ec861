"""The durable event inbox (table ``alert_events``) that feeds event rules.

Producers (drift monitor, canary decisions, judge drift, the collector's health checks) call
:func:`emit_event`; it commits one row at once, so an event survives a restart before the next
evaluation. The alert evaluation job reads a tenant's unconsumed events with
:func:`pending_events` and marks them with :func:`mark_consumed` in the same transaction as the
alert states they change: each event is applied once (at-least-once if two evaluators race; the
state machine ignores replays older than an alert's last evaluation).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from alerts.outbox import to_dt
from alerts.rules import AlertEvent
from collector.store.events import EVENT_KINDS, emit_event
from collector.store.models.alerts import AlertEventRow

__all__ = ["EVENT_KINDS", "emit_event", "mark_consumed", "pending_events", "tenants_with_events"]


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
