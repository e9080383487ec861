"""The durable notification outbox (table ``alert_notifications``).

A notification is inserted in the same transaction that advances its group's state, so a
crash can neither lose nor duplicate it. Workers claim due rows with a lease (conditional update,
so two workers never take the same row; a crashed worker's rows come back when the lease ends),
send them, and record each attempt. Delivery is at-least-once; the stable id lets receivers
deduplicate.

Order: notifications of the same (tenant, receiver, group) are delivered one after the other in
``seq`` order (``created_at`` for rows without one). :func:`claim_due` never hands out a row while
an earlier row of its group is still pending (waiting, in flight or backing off), so a receiver
never sees a group's ``resolved`` before its ``firing``; a later row goes once the earlier one is
delivered or finally failed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Engine, and_, exists, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from alerts.grouping import Notification
from collector.errors import NotFoundError
from collector.store.events import to_dt
from collector.store.models import AlertNotification

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


def to_ts(d: dt.datetime | None) -> float | None:
    """tz-aware datetime -> unix seconds (None stays None)."""
    return None if d is None else d.timestamp()


@dataclass(frozen=True)
class OutboxItem:
    """One notification in the outbox; times unix seconds, ``payload`` the exact body bytes."""

    tenant: str
    id: str
    receiver: str
    group_id: str | None
    format: str
    status: str
    payload: bytes
    attempts: int
    created_at: float
    next_attempt_at: float
    last_attempt_at: float | None
    last_status_code: int | None
    last_error: str | None
    last_delay_s: float | None
    delivered_at: float | None
    failed_at: float | None
    failure_reason: str | None
    seq: int | None = None


def _item(r: AlertNotification) -> OutboxItem:
    return OutboxItem(
        tenant=r.tenant,
        id=r.id,
        receiver=r.receiver,
        group_id=r.group_id,
        format=r.format,
        status=r.status,
        payload=r.payload.encode(),
        attempts=r.attempts,
        created_at=r.created_at.timestamp(),
        next_attempt_at=r.next_attempt_at.timestamp(),
        last_attempt_at=to_ts(r.last_attempt_at),
        last_status_code=r.last_status_code,
        last_error=r.last_error,
        last_delay_s=r.last_delay_s,
        delivered_at=to_ts(r.delivered_at),
        failed_at=to_ts(r.failed_at),
        failure_reason=r.failure_reason,
        seq=r.seq,
    )


def enqueue(
    session: Session,
    *,
    tenant: str,
    notification_id: str,
    receiver: str,
    fmt: str,
    body: bytes,
    now: float,
    group_id: str | None = None,
    seq: int | None = None,
) -> bool:
    """Add a notification body to the outbox, due at ``now`` (unix seconds).

    ``seq`` orders the notifications of one ``group_id`` (see the module docstring).

    Idempotent on ``(tenant, notification_id)``: returns False (and changes nothing) when the
    id is already there. The caller commits the session.
    """
    if session.get(AlertNotification, (tenant, notification_id)) is not None:
        return False
    session.add(
        AlertNotification(
            tenant=tenant,
            id=notification_id,
            receiver=receiver,
            group_id=group_id,
            format=fmt,
            status=PENDING,
            payload=body.decode(),
            attempts=0,
            created_at=to_dt(now),
            next_attempt_at=to_dt(now),
            seq=seq,
        )
    )
    return True


def enqueue_notification(session: Session, n: Notification, fmt: str, body: bytes) -> bool:
    """:func:`enqueue` for a planned :class:`Notification` (id, group and time from it)."""
    return enqueue(
        session,
        tenant=n.tenant,
        notification_id=n.id,
        receiver=n.receiver,
        fmt=fmt,
        body=body,
        now=n.created_at,
        group_id=n.group_id,
        seq=n.seq,
    )


def _blocked() -> ColumnElement[bool]:
    """True for a row that has an earlier pending row in its group (it must wait)."""
    n = AlertNotification
    earlier = aliased(AlertNotification)
    return exists().where(
        earlier.tenant == n.tenant,
        earlier.receiver == n.receiver,
        earlier.group_id == n.group_id,
        earlier.status == PENDING,
        earlier.id != n.id,
        or_(
            earlier.seq < n.seq,
            and_(or_(earlier.seq.is_(None), n.seq.is_(None)), earlier.created_at < n.created_at),
        ),
    )


def claim_due(engine: Engine, now: float, *, limit: int, lease_s: float) -> list[OutboxItem]:
    """Claim up to ``limit`` pending rows due at ``now``; each is hidden for ``lease_s`` s.

    A row whose group (same tenant, receiver and ``group_id``) has an earlier pending row is
    not claimed: groups deliver in order, one notification at a time.

    Raises:
        ValueError: ``limit`` < 1 or ``lease_s`` <= 0.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if lease_s <= 0:
        raise ValueError(f"lease_s must be > 0, got {lease_s}")
    claimed: list[OutboxItem] = []
    with Session(engine) as s, s.begin():
        rows = s.scalars(
            select(AlertNotification)
            .where(AlertNotification.status == PENDING)
            .where(AlertNotification.next_attempt_at <= to_dt(now))
            .where(~_blocked())
            .order_by(AlertNotification.next_attempt_at)
            .limit(limit)
        ).all()
        for r in rows:
            res = s.execute(
                update(AlertNotification)
                .where(AlertNotification.tenant == r.tenant)
                .where(AlertNotification.id == r.id)
                .where(AlertNotification.status == PENDING)
                .where(AlertNotification.next_attempt_at == r.next_attempt_at)
                .values(next_attempt_at=to_dt(now + lease_s))
                .execution_options(synchronize_session=False)
            )
            if res.rowcount == 1:  # type: ignore[attr-defined]
                claimed.append(_item(r))
    return claimed


def record_attempt(
    engine: Engine,
    item: OutboxItem,
    *,
    now: float,
    status_code: int | None,
    error: str | None,
    delivered: bool,
    retry_at: float | None,
    delay_s: float | None,
    failure_reason: str | None,
) -> None:
    """Store one attempt's result: delivered, retry at ``retry_at``, or failed with a reason.

    Raises:
        ValueError: neither delivered, nor a retry time, nor a failure reason is given.
    """
    values: dict[str, object] = {
        "attempts": AlertNotification.attempts + 1,
        "last_attempt_at": to_dt(now),
        "last_status_code": status_code,
        "last_error": error,
    }
    if delivered:
        values.update(status=DELIVERED, delivered_at=to_dt(now))
    elif retry_at is not None:
        values.update(next_attempt_at=to_dt(retry_at), last_delay_s=delay_s)
    elif failure_reason is not None:
        values.update(status=FAILED, failed_at=to_dt(now), failure_reason=failure_reason)
    else:
        raise ValueError("record_attempt needs delivered, retry_at or failure_reason")
    with Session(engine) as s, s.begin():
        s.execute(
            update(AlertNotification)
            .where(AlertNotification.tenant == item.tenant)
            .where(AlertNotification.id == item.id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


def mark_failed(engine: Engine, item: OutboxItem, *, now: float, reason: str) -> None:
    """Fail a notification without an attempt (e.g. its receiver no longer exists)."""
    with Session(engine) as s, s.begin():
        s.execute(
            update(AlertNotification)
            .where(AlertNotification.tenant == item.tenant)
            .where(AlertNotification.id == item.id)
            .values(status=FAILED, failed_at=to_dt(now), failure_reason=reason)
            .execution_options(synchronize_session=False)
        )


def next_due_at(engine: Engine) -> float | None:
    """Unix seconds of the earliest next attempt of a pending row that may go (heads of their
    groups; a row waiting for an earlier one is not due), None when nothing is pending."""
    with Session(engine) as s:
        v = s.scalar(
            select(func.min(AlertNotification.next_attempt_at))
            .where(AlertNotification.status == PENDING)
            .where(~_blocked())
        )
    if v is None:
        return None
    if isinstance(v, str):  # SQLite returns aggregates untyped
        v = dt.datetime.fromisoformat(v)
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    return float(v.timestamp())


def count_by_status(engine: Engine) -> dict[str, int]:
    """``{status: rows}`` over all tenants (feeds the outbox gauges)."""
    with Session(engine) as s:
        rows = s.execute(
            select(AlertNotification.status, func.count()).group_by(AlertNotification.status)
        ).all()
    return {str(k): int(v) for k, v in rows}


def get(engine: Engine, tenant: str, notification_id: str) -> OutboxItem:
    """One outbox row.

    Raises:
        NotFoundError: no such notification for ``tenant``.
    """
    with Session(engine) as s:
        r = s.get(AlertNotification, (tenant, notification_id))
        if r is None:
            raise NotFoundError(f"notification {notification_id!r} not found")
        return _item(r)


def list_items(engine: Engine, tenant: str, status: str | None = None) -> list[OutboxItem]:
    """Outbox rows of ``tenant`` (optionally one status), oldest first."""
    q = select(AlertNotification).where(AlertNotification.tenant == tenant)
    if status is not None:
        q = q.where(AlertNotification.status == status)
    with Session(engine) as s:
        return [_item(r) for r in s.scalars(q.order_by(AlertNotification.created_at)).all()]


def redeliver(engine: Engine, tenant: str, notification_id: str, now: float) -> None:
    """Re-queue a failed notification for a fresh round of attempts (same id and body).

    Raises:
        NotFoundError: no such notification for ``tenant``.
    """
    with Session(engine) as s, s.begin():
        r = s.get(AlertNotification, (tenant, notification_id))
        if r is None:
            raise NotFoundError(f"notification {notification_id!r} not found")
        r.status, r.attempts, r.failure_reason, r.failed_at = PENDING, 0, None, None
        r.created_at = r.next_attempt_at = to_dt(now)
        r.last_delay_s = None
