"""Alerting: rules, the alert state machine, grouping/silences, and signed webhook delivery.

Flow: the scheduler calls :func:`evaluate_rules` (metric series / events in, notifications into
the durable outbox), and a :class:`DeliveryWorker` drains the outbox with retries.
"""

from __future__ import annotations

from collector.alerts.delivery import AttemptResult, DeliveryWorker, send_once
from collector.alerts.evaluate import EvaluationResult, evaluate_rules, flush_groups
from collector.alerts.grouping import GroupState, Matcher, Notification, Silence, plan_group
from collector.alerts.receivers import (
    AlertSettings,
    Receiver,
    ReceiverDirectory,
    StaticReceivers,
    load_receivers,
)
from collector.alerts.retry import RetryPolicy
from collector.alerts.rules import (
    AlertEvent,
    EventRule,
    Grouping,
    Sample,
    Series,
    ThresholdRule,
    parse_rule,
)
from collector.alerts.state import AlertState, AlertStatus, fingerprint, step

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
    "evaluate_rules",
    "fingerprint",
    "flush_groups",
    "load_receivers",
    "parse_rule",
    "plan_group",
    "send_once",
    "step",
]
