"""Request bodies and response shapes of the alerts REST API (``driftline/api/alerts.py``).

Shapes never carry secrets: a receiver shows ``signed`` / ``has_routing_key`` and its header
names, not their values. Times are ISO 8601 UTC strings (None when unknown).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from alerts import outbox
from alerts.grouping import MatchOp, Silence
from alerts.receivers import RECEIVER_MAX_TIMEOUT_S, Receiver, ReceiverKind
from alerts.state import AlertState


def iso(t: float | None) -> str | None:
    """Unix seconds as ISO 8601 UTC; None stays None."""
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def alert_to_dict(a: AlertState) -> dict[str, Any]:
    """The API shape of one alert."""
    return {
        "fingerprint": a.fingerprint,
        "rule": a.rule,
        "status": a.status.value,
        "labels": dict(a.labels),
        "annotations": dict(a.annotations),
        "active_since": iso(a.active_since),
        "fired_at": iso(a.fired_at),
        "resolved_at": iso(a.resolved_at),
        "last_evaluated_at": iso(a.last_evaluated_at),
        "last_value": a.last_value,
        "acked_at": iso(a.acked_at),
        "acked_by": a.acked_by,
    }


class AckBody(BaseModel):
    """Who acknowledges (free text, e.g. the on-call's name)."""

    model_config = ConfigDict(extra="forbid")
    by: str = Field(default="api", min_length=1, max_length=256)


class ReceiverBody(BaseModel):
    """A receiver as sent by a client. ``secret``: your own ``whsec_`` secret; omitted with
    ``signed`` true, one is generated and returned once."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, min_length=1, max_length=256)
    kind: ReceiverKind = "generic"
    url: str
    send_resolved: bool = True
    routing_key: str | None = None
    max_alerts: int = Field(default=0, ge=0)
    timeout_s: float | None = Field(default=None, gt=0, le=RECEIVER_MAX_TIMEOUT_S)
    headers: dict[str, str] = Field(default_factory=dict)
    secret: str | None = None
    signed: bool = True


def receiver_to_dict(r: Receiver, source: str) -> dict[str, Any]:
    """The API shape of a receiver: no secret, routing key or header values."""
    return {
        "name": r.name,
        "kind": r.kind,
        "url": r.url,
        "send_resolved": r.send_resolved,
        "max_alerts": r.max_alerts,
        "timeout_s": r.timeout_s,
        "header_names": sorted(r.headers),
        "signed": r.secret is not None,
        "has_routing_key": r.routing_key is not None,
        "previous_secret_until": iso(r.previous_secret_until),
        "source": source,
    }


class RotateBody(BaseModel):
    """``grace_s``: seconds the old secret keeps signing next to the new one."""

    model_config = ConfigDict(extra="forbid")
    grace_s: float = Field(default=3600.0, ge=0, le=30 * 86400)


class MatcherBody(BaseModel):
    """One silence matcher (``=``, ``!=``, ``=~``, ``!~``; regexes fully anchored)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    value: str
    op: MatchOp = "="


class SilenceBody(BaseModel):
    """``ends_at`` or ``duration_s`` (seconds) ends the silence; ``starts_at`` default now."""

    model_config = ConfigDict(extra="forbid")
    matchers: list[MatcherBody] = Field(min_length=1)
    starts_at: str | None = None
    ends_at: str | None = None
    duration_s: float | None = Field(default=None, gt=0)
    comment: str | None = None
    created_by: str | None = None


def silence_to_dict(s: Silence, now: float) -> dict[str, Any]:
    """The API shape of a silence, with its state at ``now``."""
    st = "active" if s.is_active(now) else ("pending" if now < s.starts_at else "expired")
    return {
        "id": s.id,
        "matchers": [{"name": m.name, "value": m.value, "op": m.op} for m in s.matchers],
        "starts_at": iso(s.starts_at),
        "ends_at": iso(s.ends_at),
        "state": st,
        "comment": s.comment,
        "created_by": s.created_by,
    }


def error_summary(error: str | None) -> str | None:
    """What a non-admin sees of a delivery error: its kind (``HTTP 500``, ``timeout``,
    ``ConnectError``, ``egress denied``) without the receiver's answer or the address."""
    return None if error is None else error.split(":", 1)[0]


def delivery_to_dict(i: outbox.OutboxItem, *, admin: bool = False) -> dict[str, Any]:
    """The API shape of one outbox notification (without its body). ``last_error`` in full
    (with up to 512 bytes of the receiver's answer) for ``admin`` callers only; others get
    :func:`error_summary`: a receiver's answer may hold what a read key should not see."""
    return {
        "id": i.id,
        "receiver": i.receiver,
        "group_id": i.group_id,
        "seq": i.seq,
        "format": i.format,
        "status": i.status,
        "attempts": i.attempts,
        "created_at": iso(i.created_at),
        "next_attempt_at": iso(i.next_attempt_at) if i.status == outbox.PENDING else None,
        "last_attempt_at": iso(i.last_attempt_at),
        "last_status_code": i.last_status_code,
        "last_error": i.last_error if admin else error_summary(i.last_error),
        "delivered_at": iso(i.delivered_at),
        "failed_at": iso(i.failed_at),
        "failure_reason": i.failure_reason,
    }
