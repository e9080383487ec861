"""Alerting: rules, the alert state machine, grouping/silences, and signed webhook delivery.

Flow: the scheduler (:mod:`alerts.jobs`) calls :func:`evaluate_rules` per tenant
(series through the lake's query layer, :mod:`alerts.series`; events from the inbox fed by
:func:`emit_event`; notifications into the durable outbox), and a :class:`DeliveryWorker`
drains the outbox with retries, one notification per group at a time, connecting only where
the collector's egress policy allows (:mod:`collector.egress`: public addresses plus
``DRIFTLINE_EGRESS_ALLOW``). Silence regexes run on RE2 (linear time). REST:
``driftline/api/alerts.py``.
"""

from __future__ import annotations

from alerts.delivery import AttemptResult, DeliveryWorker, send_once
from alerts.evaluate import EvaluationResult, evaluate_rules, flush_groups
from alerts.events import emit_event
from alerts.grouping import GroupState, Matcher, Notification, Silence, plan_group
from alerts.receivers import (
    AlertSettings,
    Receiver,
    ReceiverDirectory,
    StaticReceivers,
    load_receivers,
)
from alerts.rules import (
    AlertEvent,
    EventRule,
    Grouping,
    Sample,
    Series,
    ThresholdRule,
    parse_rule,
)
from alerts.state import AlertState, AlertStatus, fingerprint, step
from collector.retry import RetryPolicy

__all__ = [
    "AlertEvent",
    "AlertSettings",
    "AlertState",
    "AlertStatus",
    "AttemptResult",
    "DeliveryWorker",
    "EvaluationResult",
    "EventRule",
    "GroupState",
    "Grouping",
    "Matcher",
    "Notification",
    "Receiver",
    "ReceiverDirectory",
    "RetryPolicy",
    "Sample",
    "Series",
    "Silence",
    "StaticReceivers",
    "ThresholdRule",
    "emit_event",
    "evaluate_rules",
    "fingerprint",
    "flush_groups",
    "load_receivers",
    "parse_rule",
    "plan_group",
    "send_once",
    "step",
]
