"""The durable event inbox (table ``alert_events``): drift, canary and judges write events here.

Producers (drift monitor, canary decisions, judge drift, the collector's health checks) call
:func:`emit_event`; it commits one row at once, so an event survives a restart before the next
evaluation. The alerts package (:mod:`alerts.events`) reads and consumes them; the inbox lives in
the store so that producers need not import the alerting stage.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Mapping
from typing import Literal, get_args

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from collector.store.models.alerts import AlertEventRow

#: Events an event rule may fire on (produced by drift/, judges/ and the collector itself).
EventKind = Literal[
    "drift_detected",
    "canary_rollback",
    "canary_promote",
    "canary_inconclusive",
    "judge_drift",
    "collector_unhealthy",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


def to_dt(t: float) -> dt.datetime:
    """Unix seconds -> tz-aware UTC datetime."""
    return dt.datetime.fromtimestamp(t, dt.UTC)


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
