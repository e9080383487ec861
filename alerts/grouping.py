"""Grouping, silencing and notification timing (Alertmanager dispatch semantics), pure logic.

Alerts routed to a receiver are partitioned into groups by the values of the rule's
``group_by`` labels. For each group, :func:`plan_group` decides at ``now`` (unix seconds) whether
a notification is due, following Alertmanager's aggregation group
(``dispatch/dispatch.go``, ``docs/configuration.md`` ``group_wait`` / ``group_interval`` /
``repeat_interval``):

* a new episode (nothing firing was notified yet) waits ``group_wait_s`` after its first
  firing alert, and never less than ``group_interval_s`` after the previous notification;
* afterwards, changes (alerts added or resolved) are sent at most every ``group_interval_s``;
* an unchanged, still-firing group is re-sent every ``repeat_interval_s`` unless every firing
  alert is acknowledged;
* silenced alerts are left out; a resolved alert is only sent if the receiver was told it fired.

Together with the rule's ``for_s`` and resolve hysteresis, this bounds notifications per group
to one per ``group_interval_s`` however much the metric flaps.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import re2

from alerts.rules import Grouping
from alerts.state import AlertState

MatchOp = Literal["=", "!=", "=~", "!~"]
#: longest regex a matcher accepts (characters); RE2 bounds its program size too
MAX_REGEX_CHARS = 1024


@functools.lru_cache(maxsize=1024)
def compile_matcher_regex(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2 (Google's linear-time engine: a match costs O(pattern x
    input), no backtracking, so ``(a+)+$`` is as fast as ``a+``). RE2 syntax: no
    backreferences or lookaround.

    Raises:
        ValueError: longer than :data:`MAX_REGEX_CHARS`, or not valid RE2 syntax (the reason).
    """
    if len(pattern) > MAX_REGEX_CHARS:
        raise ValueError(f"regex is longer than {MAX_REGEX_CHARS} characters")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except UnicodeEncodeError:
        raise ValueError("value is not a valid regex: it holds a lone surrogate") from None
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        raise ValueError(
            f"value is not a valid regex (RE2 syntax: no backreferences or lookaround): {why}"
        ) from None


@dataclass(frozen=True)
class Matcher:
    """A label matcher as in Alertmanager silences; regexes are fully anchored and run on RE2
    (linear time in the label's length, like Alertmanager's Go regexps)."""

    name: str
    value: str
    op: MatchOp = "="

    def __post_init__(self) -> None:
        if self.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"op must be one of = != =~ !~, got {self.op!r}")
        if not self.name:
            raise ValueError("name must be a non-empty label name")
        if self.op in ("=~", "!~"):
            compile_matcher_regex(self.value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy the matcher (a missing label reads as ``""``)."""
        v = labels.get(self.name, "")
        if self.op == "=":
            return v == self.value
        if self.op == "!=":
            return v != self.value
        regex = compile_matcher_regex(self.value)
        try:
            hit = regex.fullmatch(v) is not None
        except UnicodeEncodeError:  # a lone surrogate (RE2 reads UTF-8): match it as "?"
            hit = regex.fullmatch(v.encode("utf-8", "replace").decode()) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class Silence:
    """Mutes matching alerts while ``starts_at <= now < ends_at`` (unix seconds)."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float
    created_by: str | None = None
    comment: str | None = None

    def __post_init__(self) -> None:
        if not self.matchers:
            raise ValueError("matchers must not be empty (a silence would mute everything)")
        if self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")

    def is_active(self, now: float) -> bool:
        """True while the silence is in effect."""
        return self.starts_at <= now < self.ends_at

    def mutes(self, labels: Mapping[str, str], now: float) -> bool:
        """True when active at ``now`` and every matcher matches ``labels``."""
        return self.is_active(now) and all(m.matches(labels) for m in self.matchers)


@dataclass(frozen=True)
class GroupState:
    """Persistent notification state of one group (see module docstring); times unix seconds."""

    group_id: str
    group_key: str
    receiver: str
    group_labels: Mapping[str, str]
    episode_started_at: float | None = None
    last_flush_at: float | None = None
    last_sent_firing: frozenset[str] = frozenset()
    seq: int = 0


@dataclass(frozen=True)
class Notification:
    """One message to one receiver about one group.

    ``id`` is deterministic (tenant, group, sequence number ``seq``) and is the idempotency key
    on every delivery attempt; notifications of one group are delivered in ``seq`` order.
    ``alerts``: firing alerts first, then resolved ones. ``reason`` uses Alertmanager's
    ``notification_reason`` wording.
    """

    id: str
    tenant: str
    receiver: str
    group_id: str
    group_key: str
    group_labels: Mapping[str, str]
    status: Literal["firing", "resolved"]
    reason: str
    alerts: tuple[AlertState, ...]
    created_at: float
    truncated_alerts: int = 0
    seq: int | None = None


def group_of(receiver: str, labels: Mapping[str, str], group_by: Sequence[str]) -> GroupState:
    """The (empty) group an alert with ``labels`` falls into for ``receiver``.

    ``group_by == ("...",)`` groups by all labels (one group per alert), as in Alertmanager.
    """
    keys = sorted(labels) if "..." in group_by else sorted(set(group_by))
    glabels = {k: labels[k] for k in keys if k in labels}
    inner = ", ".join(f'{k}="{v}"' for k, v in glabels.items())
    key = f"{receiver}:{{{inner}}}"
    gid = hashlib.sha256(key.encode()).hexdigest()[:32]
    return GroupState(group_id=gid, group_key=key, receiver=receiver, group_labels=glabels)


def notification_id(tenant: str, group_id: str, seq: int) -> str:
    """Deterministic notification id ``msg_<32 hex>`` (Standard Webhooks ``webhook-id``)."""
    raw = f"{tenant}\x00{group_id}\x00{seq}".encode()
    return "msg_" + hashlib.sha256(raw).hexdigest()[:32]


def is_muted(alert: AlertState, silences: Sequence[Silence], now: float) -> bool:
    """True when any silence active at ``now`` matches the alert's labels."""
    return any(s.mutes(alert.labels, now) for s in silences)


def plan_group(
    tenant: str,
    group: GroupState,
    alerts: Sequence[AlertState],
    grouping: Grouping,
    now: float,
    *,
    silences: Sequence[Silence] = (),
    send_resolved: bool = True,
    max_alerts: int = 0,
) -> tuple[GroupState, Notification | None]:
    """Decide whether ``group`` notifies at ``now``; returns the new group state and the message.

    ``alerts`` are the current states of every alert in the group (any status). ``max_alerts``
    (0 = unlimited) truncates the alert list like Alertmanager's webhook ``max_alerts``.
    The returned state must be persisted together with enqueuing the notification.
    """
    by_fp = {a.fingerprint: a for a in alerts}
    firing = {a.fingerprint for a in alerts if a.is_firing and not is_muted(a, silences, now)}
    resolved = {fp for fp in group.last_sent_firing if not (fp in by_fp and by_fp[fp].is_firing)}
    new = firing - group.last_sent_firing

    if group.last_flush_at is None or not group.last_sent_firing:
        # New episode: nothing firing has been notified.
        if not firing:
            return replace(group, episode_started_at=None), None
        episode = group.episode_started_at if group.episode_started_at is not None else now
        due = episode + grouping.group_wait_s
        if group.last_flush_at is not None:
            due = max(due, group.last_flush_at + grouping.group_interval_s)
        group = replace(group, episode_started_at=episode)
        if now < due:
            return group, None
        reason = "first notification" if group.last_flush_at is None else "new alerts added"
    elif (new or resolved) and now >= group.last_flush_at + grouping.group_interval_s:
        reason = "new alerts added" if new else "some alerts resolved"
    elif (
        not new
        and not resolved
        and firing
        and any(by_fp[fp].acked_at is None for fp in firing)
        and now >= group.last_flush_at + grouping.repeat_interval_s
    ):
        reason = "repeat interval elapsed"
    else:
        return group, None

    seq = group.seq + 1
    next_group = replace(
        group,
        last_flush_at=now,
        last_sent_firing=frozenset(firing),
        seq=seq,
        episode_started_at=group.episode_started_at if firing else None,
    )
    firing_alerts = sorted((by_fp[fp] for fp in firing), key=lambda a: a.fingerprint)
    resolved_alerts = sorted((by_fp[fp] for fp in resolved if fp in by_fp), key=_fp)
    if not firing_alerts and not send_resolved:
        return next_group, None
    payload_alerts = firing_alerts + (resolved_alerts if send_resolved else [])
    truncated = 0
    if max_alerts > 0 and len(payload_alerts) > max_alerts:
        truncated = len(payload_alerts) - max_alerts
        payload_alerts = payload_alerts[:max_alerts]
    note = Notification(
        id=notification_id(tenant, group.group_id, seq),
        tenant=tenant,
        receiver=group.receiver,
        group_id=group.group_id,
        group_key=group.group_key,
        group_labels=dict(group.group_labels),
        status="firing" if firing_alerts else "resolved",
        reason=reason,
        alerts=tuple(payload_alerts),
        created_at=now,
        truncated_alerts=truncated,
        seq=seq,
    )
    return next_group, note


def _fp(a: AlertState) -> str:
    return a.fingerprint
