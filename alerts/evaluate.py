"""Evaluation entry points for the scheduler: rules + inputs -> alert states -> outbox.

:func:`evaluate_rules` feeds metric series and events through the rules and the state machine,
persists the alert states, then calls :func:`flush_groups`, which plans each group's
notification (grouping, silences, acknowledgements) and enqueues the rendered bodies in the
outbox — all in the caller's transaction, so a crash commits all of it or none.
The scheduler should call :func:`evaluate_rules` every evaluation interval (also with empty
inputs: group timers mature on time alone; ``for`` durations need a breaching observation, and
missing data drops a pending alert, see :mod:`alerts.state`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from alerts import store
from alerts.grouping import GroupState, Notification, group_of, plan_group
from alerts.outbox import enqueue_notification
from alerts.payloads import render
from alerts.receivers import ReceiverDirectory
from alerts.rules import (
    AlertEvent,
    Breach,
    EventRule,
    Series,
    ThresholdRule,
    breach_of,
    event_breach,
    render_summary,
)
from alerts.state import AlertState, advance, new_alert, step

log = logging.getLogger(__name__)
AnyRule = ThresholdRule | EventRule


@dataclass(frozen=True)
class EvaluationResult:
    """Alert states after evaluation (rules evaluated only) and the notifications enqueued."""

    alerts: tuple[AlertState, ...]
    notifications: tuple[Notification, ...] = field(default_factory=tuple)


def _alert_labels(rule: AnyRule, labels: Mapping[str, str]) -> dict[str, str]:
    return {**labels, **rule.labels, "severity": rule.severity}


def _annotations(
    rule: AnyRule, value: float | None, extra: Mapping[str, str], labels: Mapping[str, str]
) -> dict[str, str]:
    return {**rule.annotations, **extra, "summary": render_summary(rule, value, labels)}


def apply_series(
    rule: ThresholdRule, alerts: dict[str, AlertState], series: Sequence[Series], now: float
) -> None:
    """Step the alerts of ``rule`` through ``series`` (in place in ``alerts``), then to ``now``.

    Samples at or before an alert's ``last_evaluated_at`` are skipped, so overlapping windows
    can be passed again safely. An alert of ``rule`` whose label set has no series in this
    evaluation is absent at ``now`` (:func:`alerts.state.advance`: pending -> inactive, firing
    stays firing). Pure apart from mutating ``alerts``.
    """
    seen: set[str] = set()
    for s in series:
        proto = new_alert(rule.name, _alert_labels(rule, s.labels))
        a = alerts.get(proto.fingerprint, proto)
        for smp in sorted(s.samples, key=lambda x: x.at):
            if smp.at > now or (a.last_evaluated_at is not None and smp.at <= a.last_evaluated_at):
                continue
            b = breach_of(rule, smp.value, firing=a.is_firing)
            a = step(
                a,
                b,
                smp.at,
                for_s=rule.for_s,
                resolve_for_s=rule.resolve_for_s,
                value=smp.value,
                annotations=_annotations(rule, smp.value, {}, a.labels),
            )
        alerts[a.fingerprint] = a
        seen.add(a.fingerprint)
    for fp, a in list(alerts.items()):
        if a.rule == rule.name and fp not in seen:
            alerts[fp] = advance(a, now, for_s=rule.for_s, resolve_for_s=rule.resolve_for_s)


def apply_events(
    rule: EventRule, alerts: dict[str, AlertState], events: Sequence[AlertEvent], now: float
) -> None:
    """Step the alerts of event ``rule`` through matching ``events``; auto-resolve firing
    alerts without a matching event for ``resolve_after_s`` seconds. Mutates ``alerts``."""
    for e in sorted(events, key=lambda x: x.at):
        b = event_breach(rule, e)
        if b is Breach.UNKNOWN or e.at > now:
            continue
        proto = new_alert(rule.name, _alert_labels(rule, e.labels))
        a = alerts.get(proto.fingerprint, proto)
        alerts[a.fingerprint] = step(
            a,
            b,
            e.at,
            for_s=0.0,
            resolve_for_s=0.0,
            value=e.value,
            annotations=_annotations(rule, e.value, e.annotations, a.labels),
        )
    if rule.resolve_after_s is None:
        return
    for fp, a in list(alerts.items()):
        if (
            a.rule == rule.name
            and a.is_firing
            and a.last_breach_at is not None
            and now - a.last_breach_at >= rule.resolve_after_s
        ):
            alerts[fp] = step(a, Breach.CLEAR, now, for_s=0.0, resolve_for_s=0.0)


def evaluate_rules(
    session: Session,
    tenant: str,
    rules: Sequence[AnyRule],
    *,
    now: float,
    receivers: ReceiverDirectory,
    series: Mapping[str, Sequence[Series]] | None = None,
    events: Sequence[AlertEvent] = (),
    external_url: str = "",
) -> EvaluationResult:
    """Evaluate ``rules`` of ``tenant`` at ``now`` (unix seconds) and enqueue notifications.

    Args:
        session: open session; the caller commits (state and outbox rows go together).
        series: rule name -> one :class:`Series` per label set (threshold rules); values in the
            statistic's unit (seconds, ratio, USD, score).
        events: discrete events (drift, canary, judge drift, collector health) for event rules.
        receivers: directory used to render each receiver's format.
        external_url: base URL put in payload links.

    Returns the states of the evaluated rules' alerts and the notifications enqueued.
    """
    series = series or {}
    alerts = store.load_alerts(session, tenant)
    before = dict(alerts)
    for rule in rules:
        if isinstance(rule, ThresholdRule):
            apply_series(rule, alerts, series.get(rule.name, ()), now)
        else:
            apply_events(rule, alerts, events, now)
    changed = [a for fp, a in alerts.items() if before.get(fp) != a]
    store.save_alerts(session, tenant, changed, now)
    notes = flush_groups(
        session,
        tenant,
        rules,
        now=now,
        receivers=receivers,
        alerts=alerts,
        external_url=external_url,
    )
    names = {r.name for r in rules}
    mine = tuple(a for a in alerts.values() if a.rule in names)
    return EvaluationResult(alerts=mine, notifications=tuple(notes))


def flush_groups(
    session: Session,
    tenant: str,
    rules: Sequence[AnyRule],
    *,
    now: float,
    receivers: ReceiverDirectory,
    alerts: Mapping[str, AlertState] | None = None,
    external_url: str = "",
) -> list[Notification]:
    """Plan every group of ``rules``' alerts at ``now``; enqueue and return due notifications.

    A group whose receiver is not configured is skipped (logged) without advancing, so it
    notifies once the receiver exists.
    """
    if alerts is None:
        alerts = store.load_alerts(session, tenant)
    silences = store.active_silences(session, tenant, now)
    by_rule = {r.name: r for r in rules}
    groups: dict[str, tuple[GroupState, AnyRule, list[AlertState]]] = {}
    for a in sorted(alerts.values(), key=lambda x: x.fingerprint):
        rule = by_rule.get(a.rule)
        if rule is None:
            continue
        for recv in rule.receivers:
            g = group_of(recv, a.labels, rule.grouping.group_by)
            groups.setdefault(g.group_id, (g, rule, []))[2].append(a)
    notes: list[Notification] = []
    for gid in sorted(groups):
        empty, rule, members = groups[gid]
        receiver = receivers.get(tenant, empty.receiver)
        if receiver is None:
            log.warning(
                "tenant %r rule %r: receiver %r is not configured; group %s waits",
                tenant,
                rule.name,
                empty.receiver,
                empty.group_key,
            )
            continue
        current = store.load_group(session, tenant, empty)
        nxt, note = plan_group(
            tenant,
            current,
            members,
            rule.grouping,
            now,
            silences=silences,
            send_resolved=receiver.send_resolved,
            max_alerts=receiver.max_alerts,
        )
        if nxt != current:
            store.save_group(session, tenant, nxt, now)
        if note is not None:
            enqueue_notification(session, note, receiver.kind, render(note, receiver, external_url))
            notes.append(note)
    return notes
