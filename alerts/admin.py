"""Queries and changes behind the alerts REST API (``driftline/api/alerts.py``).

Every function is scoped to one tenant: rows of other tenants are invisible. Functions take
a ``Session`` and the caller owns the transaction. Times are unix seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from alerts import store
from alerts.grouping import Silence
from alerts.outbox import to_dt
from alerts.receivers import Receiver
from alerts.rules import EventRule, ThresholdRule, parse_rule
from alerts.signing import generate_secret
from alerts.state import AlertState, AlertStatus
from collector.errors import NotFoundError
from collector.store.models import Alert, AlertReceiver, AlertRule, AlertSilence

SilenceState = Literal["active", "pending", "expired", "all"]


@dataclass(frozen=True)
class StoredRule:
    """A rule with its switch and times (unix seconds)."""

    rule: ThresholdRule | EventRule
    enabled: bool
    created_at: float
    updated_at: float


# --- alerts ---


def list_alerts(
    session: Session,
    tenant: str,
    *,
    statuses: tuple[AlertStatus, ...] = (),
    rule: str | None = None,
    labels: Mapping[str, str] | None = None,
    after: str | None = None,
    limit: int = 100,
) -> tuple[list[AlertState], str | None]:
    """Alerts of ``tenant`` ordered by fingerprint, after the cursor ``after``.

    ``statuses`` empty = every status; ``labels``: each must be equal. Returns the page and the
    next cursor (the last fingerprint) or None on the last page. Raises ValueError if
    ``limit`` < 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    q = select(Alert).where(Alert.tenant == tenant).order_by(Alert.fingerprint)
    if statuses:
        q = q.where(Alert.status.in_([s.value for s in statuses]))
    if rule is not None:
        q = q.where(Alert.rule == rule)
    if after is not None:
        q = q.where(Alert.fingerprint > after)
    want = dict(labels or {})
    page: list[AlertState] = []
    for row in session.scalars(q).yield_per(500):
        if any(row.labels.get(k) != v for k, v in want.items()):
            continue
        page.append(store.alert_state_of_row(row))
        if len(page) > limit:
            break
    if len(page) > limit:
        return page[:limit], page[limit - 1].fingerprint
    return page, None


def get_alert(session: Session, tenant: str, fingerprint: str) -> AlertState:
    """One alert. Raises NotFoundError when ``tenant`` has no such alert."""
    row = session.get(Alert, (tenant, fingerprint))
    if row is None:
        raise NotFoundError(f"alert {fingerprint!r} not found")
    return store.alert_state_of_row(row)


# --- rules ---


def _stored(row: AlertRule) -> StoredRule:
    return StoredRule(
        parse_rule(row.spec), row.enabled, row.created_at.timestamp(), row.updated_at.timestamp()
    )


def list_rules(session: Session, tenant: str) -> list[StoredRule]:
    """Every rule of ``tenant`` (enabled or not), sorted by name."""
    rows = session.scalars(
        select(AlertRule).where(AlertRule.tenant == tenant).order_by(AlertRule.name)
    ).all()
    return [_stored(r) for r in rows]


def get_rule(session: Session, tenant: str, name: str) -> StoredRule:
    """One rule. Raises NotFoundError when absent."""
    row = session.get(AlertRule, (tenant, name))
    if row is None:
        raise NotFoundError(f"rule {name!r} not found")
    return _stored(row)


def rule_exists(session: Session, tenant: str, name: str) -> bool:
    """True when ``tenant`` has a rule called ``name``."""
    return session.get(AlertRule, (tenant, name)) is not None


def delete_rule(session: Session, tenant: str, name: str) -> None:
    """Delete a rule and its alert instances (no resolved notification is sent).

    Raises NotFoundError when absent.
    """
    row = session.get(AlertRule, (tenant, name))
    if row is None:
        raise NotFoundError(f"rule {name!r} not found")
    session.delete(row)
    session.execute(delete(Alert).where(Alert.tenant == tenant, Alert.rule == name))


# --- receivers ---


def db_receiver(session: Session, tenant: str, name: str) -> Receiver:
    """Receiver ``name`` of ``tenant`` from the table. Raises NotFoundError when absent."""
    r = store.load_db_receiver(session, tenant, name)
    if r is None:
        raise NotFoundError(f"receiver {name!r} not found")
    return r


def delete_receiver(session: Session, tenant: str, name: str) -> None:
    """Delete a receiver from the table. Raises NotFoundError when absent."""
    row = session.get(AlertReceiver, (tenant, name))
    if row is None:
        raise NotFoundError(f"receiver {name!r} not found")
    session.delete(row)


def rotate_secret(session: Session, tenant: str, name: str, *, now: float, grace_s: float) -> str:
    """Give receiver ``name`` a new ``whsec_`` secret and return it (the only time it is shown).

    The old secret keeps signing next to the new one for ``grace_s`` seconds (0: dropped at
    once). Raises NotFoundError when absent, ValueError when ``grace_s`` < 0.
    """
    if grace_s < 0:
        raise ValueError(f"grace_s must be >= 0, got {grace_s}")
    old = db_receiver(session, tenant, name)
    secret = generate_secret()
    keep = old.secret if (old.secret is not None and grace_s > 0) else None
    new = replace_receiver(
        old,
        secret=SecretStr(secret),
        previous_secret=keep,
        previous_secret_until=(now + grace_s) if keep is not None else None,
    )
    store.save_receiver(session, new, now=now)
    return secret


def replace_receiver(r: Receiver, **changes: object) -> Receiver:
    """``r`` with ``changes`` applied, validated again (ValueError on invalid values)."""
    return Receiver.model_validate({**r.model_dump(), **changes}).check_kind()


# --- silences ---


def list_silences(
    session: Session, tenant: str, *, state: SilenceState, now: float
) -> list[Silence]:
    """Silences of ``tenant`` by state at ``now``: ``active`` (in effect), ``pending`` (not
    started), ``expired`` (ended) or ``all``; newest end first."""
    q = select(AlertSilence).where(AlertSilence.tenant == tenant)
    t = to_dt(now)
    if state == "active":
        q = q.where(AlertSilence.starts_at <= t, AlertSilence.ends_at > t)
    elif state == "pending":
        q = q.where(AlertSilence.starts_at > t)
    elif state == "expired":
        q = q.where(AlertSilence.ends_at <= t)
    rows = session.scalars(q.order_by(AlertSilence.ends_at.desc(), AlertSilence.id)).all()
    return [store.silence_of_row(r) for r in rows]


def get_silence(session: Session, tenant: str, silence_id: str) -> Silence:
    """One silence. Raises NotFoundError when absent."""
    row = session.get(AlertSilence, (tenant, silence_id))
    if row is None:
        raise NotFoundError(f"silence {silence_id!r} not found")
    return store.silence_of_row(row)
