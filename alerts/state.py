"""The alert state machine: inactive -> pending -> firing -> resolved, per fingerprint.

Pure functions with an explicit ``now`` (unix seconds); persistence is in
:mod:`alerts.store`. Semantics follow Prometheus alerting rules: a breach must hold
for ``for_s`` before the alert fires (pending meanwhile; a clear observation while pending drops
it without any notification), and a firing alert resolves only after the condition has been
clear for ``resolve_for_s`` (``keep_firing_for``).

Missing data (an unknown observation, or a label set absent from an evaluation) neither fires nor
resolves an alert: a pending alert returns to inactive, as Prometheus drops a pending alert whose
series is absent from an evaluation (``rules/alerting.go``: active alerts not in the result
set are deleted unless firing); a firing alert stays firing, its resolve countdown paused, until
an observation says otherwise (Prometheus keeps a firing alert through ``keep_firing_for``; here
only a clear observation resolves, so a gap never sends a false ``resolved`` at night).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from alerts.rules import Breach


class AlertStatus(StrEnum):
    """Lifecycle of one alert instance."""

    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


def fingerprint(rule: str, labels: Mapping[str, str]) -> str:
    """Stable 16-hex-digit id of the alert (rule, label set); independent of label order.

    SHA-256 over ``alertname`` and the sorted ``name=value`` pairs, NUL-separated (same role
    as Alertmanager's 64-bit label-set fingerprint).
    """
    h = hashlib.sha256(rule.encode())
    for k in sorted(labels):
        h.update(b"\x00" + k.encode() + b"\x00" + str(labels[k]).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class AlertState:
    """One alert instance. Times are unix seconds; None = not (yet) happened.

    ``active_since``: start of the current breach episode (pending or firing);
    ``clear_since``: while firing, when the condition was first seen clear again;
    ``last_breach_at``: the latest breaching observation (event rules auto-resolve from it).
    """

    fingerprint: str
    rule: str
    labels: Mapping[str, str]
    status: AlertStatus = AlertStatus.INACTIVE
    annotations: Mapping[str, str] = field(default_factory=dict)
    active_since: float | None = None
    fired_at: float | None = None
    resolved_at: float | None = None
    clear_since: float | None = None
    last_breach_at: float | None = None
    last_evaluated_at: float | None = None
    last_value: float | None = None
    acked_at: float | None = None
    acked_by: str | None = None

    @property
    def is_firing(self) -> bool:
        """True while the alert is firing."""
        return self.status is AlertStatus.FIRING


def new_alert(rule: str, labels: Mapping[str, str]) -> AlertState:
    """An inactive alert for ``rule`` and ``labels`` (``alertname`` is added to the labels)."""
    full = {**labels, "alertname": rule}
    return AlertState(fingerprint=fingerprint(rule, full), rule=rule, labels=full)


def step(
    state: AlertState,
    breach: Breach,
    now: float,
    *,
    for_s: float,
    resolve_for_s: float,
    value: float | None = None,
    annotations: Mapping[str, str] | None = None,
) -> AlertState:
    """Advance ``state`` by one observation made at ``now`` (unix seconds).

    Transitions (``for_s``, ``resolve_for_s`` in seconds, both >= 0):

    * inactive/resolved + breaching -> pending (``active_since = now``), or firing at once
      when ``for_s == 0``;
    * pending + breaching for ``now - active_since >= for_s`` -> firing (``fired_at = now``);
    * pending + clear -> inactive (never notified);
    * firing + clear held ``resolve_for_s`` -> resolved (``resolved_at = now``); a breaching
      observation meanwhile cancels the resolve countdown;
    * pending + unknown -> inactive (``active_since = None``; never notified);
    * firing + unknown -> firing: no resolution on missing data; a running resolve countdown
      (``clear_since``) is kept but completes only on a later clear observation;
    * inactive/resolved + unknown: no change (only ``last_evaluated_at``).

    Observations older than ``last_evaluated_at`` are ignored (idempotent replay).
    Acknowledgement is cleared when a new episode starts.

    Raises:
        ValueError: ``for_s`` or ``resolve_for_s`` is negative.
    """
    if for_s < 0:
        raise ValueError(f"for_s must be >= 0, got {for_s}")
    if resolve_for_s < 0:
        raise ValueError(f"resolve_for_s must be >= 0, got {resolve_for_s}")
    if state.last_evaluated_at is not None and now < state.last_evaluated_at:
        return state
    s = replace(state, last_evaluated_at=now)
    if value is not None:
        s = replace(s, last_value=value)
    if annotations is not None and breach is Breach.BREACHING:
        s = replace(s, annotations=dict(annotations))
    if breach is Breach.UNKNOWN:
        if s.status is AlertStatus.PENDING:
            return replace(s, status=AlertStatus.INACTIVE, active_since=None)
        return s

    if breach is Breach.BREACHING:
        s = replace(s, last_breach_at=now)
        if s.status in (AlertStatus.INACTIVE, AlertStatus.RESOLVED):
            s = replace(
                s,
                status=AlertStatus.PENDING,
                active_since=now,
                fired_at=None,
                resolved_at=None,
                clear_since=None,
                acked_at=None,
                acked_by=None,
            )
        elif s.status is AlertStatus.FIRING:
            s = replace(s, clear_since=None)
        return _mature(s, now, for_s=for_s, resolve_for_s=resolve_for_s)

    # CLEAR
    if s.status is AlertStatus.PENDING:
        return replace(s, status=AlertStatus.INACTIVE, active_since=None)
    if s.status is AlertStatus.FIRING and s.clear_since is None:
        s = replace(s, clear_since=now)
    return _mature(s, now, for_s=for_s, resolve_for_s=resolve_for_s)


def _mature(s: AlertState, now: float, *, for_s: float, resolve_for_s: float) -> AlertState:
    """Apply the time-based transitions (pending -> firing, clearing -> resolved) at ``now``."""
    if (
        s.status is AlertStatus.PENDING
        and s.active_since is not None
        and now - s.active_since >= for_s
    ):
        return replace(s, status=AlertStatus.FIRING, fired_at=now)
    if (
        s.status is AlertStatus.FIRING
        and s.clear_since is not None
        and now - s.clear_since >= resolve_for_s
    ):
        return replace(s, status=AlertStatus.RESOLVED, resolved_at=now, clear_since=None)
    return s


def advance(state: AlertState, now: float, *, for_s: float, resolve_for_s: float) -> AlertState:
    """An evaluation at ``now`` in which the alert's label set is absent (no sample at all).

    The same as an unknown observation (:func:`step` with ``Breach.UNKNOWN``): a pending alert
    returns to inactive, a firing one stays firing; time alone never fires nor resolves.
    Raises ValueError like :func:`step`.
    """
    return step(state, Breach.UNKNOWN, now, for_s=for_s, resolve_for_s=resolve_for_s)


def acknowledge(state: AlertState, now: float, by: str) -> AlertState:
    """Mark a firing alert acknowledged by ``by`` at ``now``: repeat notifications stop.

    Raises:
        ValueError: the alert is not firing, or ``by`` is empty.
    """
    if not by:
        raise ValueError("by must be a non-empty user name")
    if not state.is_firing:
        raise ValueError(f"alert {state.fingerprint} is {state.status}, not firing")
    return replace(state, acked_at=now, acked_by=by)
