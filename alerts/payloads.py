"""Notification bodies per receiver kind. Pure: a :class:`Notification` in, body bytes out.

* ``alertmanager`` — Alertmanager webhook payload version ``"4"`` (``notify/webhook/webhook.go``,
  ``template/template.go``): ``groupKey``, ``status``, ``receiver`` (regex-quoted like Go's
  ``regexp.QuoteMeta``), ``groupLabels``, ``commonLabels``, ``commonAnnotations``,
  ``externalURL``, ``truncatedAlerts``, ``notification_reason`` and ``alerts[]``.
* ``slack`` — incoming webhook ``{"text": ..., "blocks": [...]}`` (``text`` is the fallback).
* ``pagerduty`` — Events API v2 ``trigger`` / ``resolve`` with ``dedup_key`` = the group id, so
  the resolve closes the incident its trigger opened.
* ``generic`` — Standard Webhooks' suggested envelope ``{"type", "timestamp", "data"}``.

Bodies are rendered once, stored in the outbox and sent byte-identical on every attempt.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from alerts.grouping import Notification
from alerts.receivers import Receiver
from alerts.state import AlertState

#: Alertmanager's ``endsAt`` while the end is unknown (Go's zero time).
ZERO_TIME = "0001-01-01T00:00:00Z"
_GO_META = set("\\.+*?()|[]{}^$")


def quote_meta(s: str) -> str:
    """Go ``regexp.QuoteMeta``: backslash-escape ``\\.+*?()|[]{}^$`` (Alertmanager ``receiver``)."""
    return "".join("\\" + c if c in _GO_META else c for c in s)


def rfc3339(t: float | None) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds (``...Z``); None -> Go zero time."""
    if t is None:
        return ZERO_TIME
    d = dt.datetime.fromtimestamp(t, dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first = maps[0]
    return {k: v for k, v in sorted(first.items()) if all(m.get(k) == v for m in maps[1:])}


def _alert_status(a: AlertState) -> str:
    return "firing" if a.is_firing else "resolved"


def alertmanager_body(n: Notification, receiver: Receiver, external_url: str) -> dict[str, Any]:
    """The Alertmanager v4 webhook object for ``n`` (reference §4.1)."""
    alerts = [
        {
            "status": _alert_status(a),
            "labels": dict(sorted(a.labels.items())),
            "annotations": dict(sorted(a.annotations.items())),
            "startsAt": rfc3339(a.fired_at if a.fired_at is not None else a.active_since),
            "endsAt": rfc3339(None if a.is_firing else a.resolved_at),
            "generatorURL": f"{external_url}/alerts/{a.fingerprint}",
            "fingerprint": a.fingerprint,
        }
        for a in n.alerts
    ]
    return {
        "version": "4",
        "groupKey": n.group_key,
        "truncatedAlerts": n.truncated_alerts,
        "status": n.status,
        "receiver": quote_meta(receiver.name),
        "groupLabels": dict(sorted(n.group_labels.items())),
        "commonLabels": _common([a.labels for a in n.alerts]),
        "commonAnnotations": _common([a.annotations for a in n.alerts]),
        "externalURL": external_url,
        "notification_reason": n.reason,
        "alerts": alerts,
    }


def _title(n: Notification) -> str:
    name = n.group_labels.get("alertname") or (n.alerts[0].rule if n.alerts else "alert")
    nfire = sum(a.is_firing for a in n.alerts)
    if n.status == "firing":
        return f"[FIRING:{nfire}] {name}"
    return f"[RESOLVED] {name}"


def _line(a: AlertState) -> str:
    summary = a.annotations.get("summary") or a.rule
    labels = ", ".join(f"{k}={v}" for k, v in sorted(a.labels.items()) if k != "alertname")
    return f"{'🔥' if a.is_firing else '✅'} {summary} ({labels})"


def slack_body(n: Notification, external_url: str) -> dict[str, Any]:
    """Slack incoming-webhook body: mrkdwn ``text`` fallback plus section blocks (§4.4)."""
    lines = [_line(a) for a in n.alerts]
    text = f"*{_title(n)}*\n" + "\n".join(lines)
    return {
        "text": text,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": _title(n)[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"<{external_url}|driftline> · {n.reason}"}
                ],
            },
        ],
    }


def _pd_severity(n: Notification) -> str:
    order = ["critical", "error", "warning", "info"]
    found = [a.labels.get("severity", "warning") for a in n.alerts]
    for sev in order:
        if sev in found:
            return sev
    return "warning"


def pagerduty_body(n: Notification, receiver: Receiver, external_url: str) -> dict[str, Any]:
    """PagerDuty Events API v2 event (§4.3): trigger while firing, resolve when resolved.

    Raises:
        ValueError: the receiver has no ``routing_key``.
    """
    if receiver.routing_key is None:
        raise ValueError(f"receiver {receiver.name!r}: pagerduty needs routing_key")
    body: dict[str, Any] = {
        "routing_key": receiver.routing_key.get_secret_value(),
        "event_action": "trigger" if n.status == "firing" else "resolve",
        "dedup_key": n.group_id,
        "client": "driftline",
        "client_url": external_url,
    }
    if n.status == "firing":
        body["payload"] = {
            "summary": (_title(n) + ": " + "; ".join(_line(a) for a in n.alerts))[:1024],
            "source": n.group_labels.get("service_name") or "driftline",
            "severity": _pd_severity(n),
            "timestamp": rfc3339(n.created_at),
            "group": n.group_key[:255],
            "class": n.group_labels.get("alertname", ""),
            "custom_details": {
                "notification_id": n.id,
                "alerts": [
                    {"fingerprint": a.fingerprint, "status": _alert_status(a), "labels": a.labels}
                    for a in n.alerts
                ],
            },
        }
    return body


def generic_body(n: Notification, external_url: str) -> dict[str, Any]:
    """Standard Webhooks envelope ``{"type": "alert.firing|alert.resolved", ...}`` (§4.2)."""
    return {
        "type": f"alert.{n.status}",
        "timestamp": rfc3339(n.created_at),
        "data": {
            "id": n.id,
            "tenant": n.tenant,
            "receiver": n.receiver,
            "group_key": n.group_key,
            "group_labels": dict(n.group_labels),
            "reason": n.reason,
            "truncated_alerts": n.truncated_alerts,
            "external_url": external_url,
            "alerts": [
                {
                    "fingerprint": a.fingerprint,
                    "rule": a.rule,
                    "status": _alert_status(a),
                    "labels": dict(a.labels),
                    "annotations": dict(a.annotations),
                    "value": a.last_value,
                    "starts_at": rfc3339(a.fired_at) if a.fired_at is not None else None,
                    "ends_at": rfc3339(a.resolved_at) if not a.is_firing else None,
                    "acknowledged_by": a.acked_by,
                }
                for a in n.alerts
            ],
        },
    }


def render(n: Notification, receiver: Receiver, external_url: str = "") -> bytes:
    """Serialise ``n`` for ``receiver.kind`` as UTF-8 JSON with sorted keys (deterministic).

    Raises:
        ValueError: the receiver is misconfigured for its kind.
    """
    url = external_url.rstrip("/")
    if receiver.kind == "alertmanager":
        obj = alertmanager_body(n, receiver, url)
    elif receiver.kind == "slack":
        obj = slack_body(n, url)
    elif receiver.kind == "pagerduty":
        obj = pagerduty_body(n, receiver, url)
    else:
        obj = generic_body(n, url)
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
