"""Alert rules (per-tenant data) and their evaluation against metric values and events.

Two kinds of rule:

* :class:`ThresholdRule` — an SLO over a statistic (p99 TTFT, TPOT, error rate, 429 rate, KV-cache
  usage, speculative-decoding acceptance, cost per 1k tokens, judge quality, thumbs-down rate).
  It breaches while ``value <op> threshold``; after it fires it resolves only once the value is
  back on the good side of ``resolve_threshold`` (hysteresis band), see :func:`breach_of`.
* :class:`EventRule` — fires on a discrete event (drift detected, canary rollback / promotion /
  inconclusive, judge drift, collector health) whose labels match, see :func:`event_breach`.

``for_s`` / ``resolve_for_s`` (Prometheus ``for`` / ``keep_firing_for``) are applied by the state
machine in :mod:`alerts.state`. Rules are pydantic models so they round-trip through
the ``alert_rules.spec`` JSON column and the REST API.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from collector.store.events import EventKind

#: Statistics a threshold rule may watch; units in the name (seconds, ratio 0..1, USD, score).
Stat = Literal[
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "queue_s",
    "itl_s",
    "itl_p50_s",
    "server_ttft_s",
    "server_e2e_s",
    "gateway_queue_s",
    "error_rate",
    "rejection_rate_429",
    "kv_cache_usage",
    "spec_decode_acceptance_rate",
    "cost_per_1k_tokens_usd",
    "judge_score",
    "judge_pass_rate",
    "thumbs_down_rate",
]


Severity = Literal["critical", "error", "warning", "info"]
Op = Literal[">", ">=", "<", "<="]

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Grouping(BaseModel):
    """How alerts of a rule are batched into notifications (Alertmanager ``route`` timers).

    Seconds. ``group_wait_s``: delay before the first notification of a new group;
    ``group_interval_s``: minimum gap between notifications about changes of a group;
    ``repeat_interval_s``: re-send while still firing and unchanged.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_by: tuple[str, ...] = ("alertname",)
    group_wait_s: float = Field(default=30.0, ge=0)
    group_interval_s: float = Field(default=300.0, ge=0)
    repeat_interval_s: float = Field(default=4 * 3600.0, gt=0)


class _RuleBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    severity: Severity = "warning"
    summary: str = Field(
        default="",
        description=(
            "Human text; {value}, {threshold} and {labels.<name>} (the alert's label, e.g. "
            "{labels.rollout}) are substituted."
        ),
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Added to every alert.")
    annotations: dict[str, str] = Field(default_factory=dict)
    receivers: tuple[str, ...] = Field(min_length=1)
    grouping: Grouping = Field(default_factory=lambda: Grouping())

    @field_validator("labels")
    @classmethod
    def _label_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _LABEL_NAME.match(k):
                raise ValueError(f"label name {k!r} must match [A-Za-z_][A-Za-z0-9_]*")
        return v


class ThresholdRule(_RuleBase):
    """``stat`` (at ``quantile`` for latencies) ``op`` ``threshold`` for ``for_s`` seconds.

    Example: p99 TTFT > 2 s for 5 min, resolving below 1.5 s held for 5 min::

        ThresholdRule(name="ttft_p99_high", stat="ttft_s", quantile=0.99, op=">",
                      threshold=2.0, for_s=300, resolve_threshold=1.5, resolve_for_s=300,
                      receivers=("oncall",))

    ``window_s`` and ``filters`` (e.g. ``{"service_name": "chat-api"}``) tell the stats feeder
    (:mod:`alerts.series`) what to compute, ``min_samples`` how many observations
    the window needs for a value (fewer: unknown); ``group_labels`` are the dimensions it
    splits the series by (one alert per label set).
    """

    kind: Literal["threshold"] = "threshold"
    stat: Stat
    quantile: float | None = Field(default=None, gt=0, lt=1)
    op: Op = ">"
    threshold: float
    resolve_threshold: float | None = None
    for_s: float = Field(default=0.0, ge=0)
    resolve_for_s: float = Field(default=0.0, ge=0)
    window_s: float = Field(default=300.0, gt=0)
    min_samples: int = Field(
        default=1, ge=1, description="Fewer observations in the window: value unknown."
    )
    filters: dict[str, str] = Field(default_factory=dict)
    group_labels: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> ThresholdRule:
        if not math.isfinite(self.threshold):
            raise ValueError("threshold must be finite")
        rt = self.resolve_threshold
        if rt is not None:
            if not math.isfinite(rt):
                raise ValueError("resolve_threshold must be finite")
            # The resolve level must sit on the good side of (or at) the firing level.
            if (self.op in (">", ">=") and rt > self.threshold) or (
                self.op in ("<", "<=") and rt < self.threshold
            ):
                raise ValueError(
                    "resolve_threshold must not be on the firing side of threshold "
                    f"(op {self.op!r}, threshold {self.threshold}, resolve_threshold {rt})"
                )
        return self


class EventRule(_RuleBase):
    """Fires when an event of ``event`` kind whose labels include ``match`` arrives.

    It resolves when a matching event with ``resolved=True`` arrives, or after
    ``resolve_after_s`` seconds without a new matching event (None: only explicitly).
    """

    kind: Literal["event"] = "event"
    event: EventKind
    match: dict[str, str] = Field(default_factory=dict)
    resolve_after_s: float | None = Field(default=None, gt=0)

    @property
    def for_s(self) -> float:
        """Events fire at once (no pending phase)."""
        return 0.0

    @property
    def resolve_for_s(self) -> float:
        """Event alerts resolve at once when told to."""
        return 0.0


Rule = Annotated[ThresholdRule | EventRule, Field(discriminator="kind")]
_RULE_ADAPTER: TypeAdapter[ThresholdRule | EventRule] = TypeAdapter(Rule)


def parse_rule(spec: Mapping[str, object]) -> ThresholdRule | EventRule:
    """Validate a rule from JSON (``alert_rules.spec``, REST body).

    Raises:
        pydantic.ValidationError: the spec is invalid (a ValueError subclass).
    """
    return _RULE_ADAPTER.validate_python(dict(spec))


class Breach(StrEnum):
    """Verdict of one observation: over the line, back to good, or unknown (no data)."""

    BREACHING = "breaching"
    CLEAR = "clear"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Sample:
    """One value of a statistic at ``at`` (unix seconds). ``value`` None = no data."""

    at: float
    value: float | None


@dataclass(frozen=True)
class Series:
    """Values of one rule's statistic for one label set, oldest first."""

    labels: Mapping[str, str]
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class AlertEvent:
    """A discrete event fed to event rules (drift result, canary decision, health change).

    ``at`` is unix seconds; ``labels`` identify the subject (e.g. ``rollout``, ``signal``,
    ``segment``); ``resolved`` True means the condition has cleared.
    """

    kind: EventKind
    at: float
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    value: float | None = None
    resolved: bool = False


def breach_of(rule: ThresholdRule, value: float | None, *, firing: bool) -> Breach:
    """Classify ``value`` for ``rule`` given whether the alert is currently firing.

    Not firing: breaching iff ``value <op> threshold``. Firing: still breaching until the value
    is on the good side of ``resolve_threshold`` (defaults to ``threshold``) — values inside the
    hysteresis band keep the alert firing (Prometheus-style hysteresis by two thresholds).
    None or NaN is UNKNOWN: missing data neither fires nor resolves an alert.
    """
    if value is None or math.isnan(value):
        return Breach.UNKNOWN
    cmp = _OPS[rule.op]
    if not firing:
        return Breach.BREACHING if cmp(value, rule.threshold) else Breach.CLEAR
    level = rule.threshold if rule.resolve_threshold is None else rule.resolve_threshold
    if rule.resolve_threshold is None:
        return Breach.BREACHING if cmp(value, level) else Breach.CLEAR
    # Clear only strictly past the resolve level on the good side.
    if rule.op in (">", ">="):
        return Breach.CLEAR if value < level else Breach.BREACHING
    return Breach.CLEAR if value > level else Breach.BREACHING


def event_matches(rule: EventRule, event: AlertEvent) -> bool:
    """True when ``event`` is of the rule's kind and carries every ``match`` label."""
    return event.kind == rule.event and all(event.labels.get(k) == v for k, v in rule.match.items())


def event_breach(rule: EventRule, event: AlertEvent) -> Breach:
    """BREACHING for a matching event, CLEAR for a matching ``resolved`` event, else UNKNOWN."""
    if not event_matches(rule, event):
        return Breach.UNKNOWN
    return Breach.CLEAR if event.resolved else Breach.BREACHING


_LABEL_REF = re.compile(r"\{labels\.([A-Za-z_][A-Za-z0-9_]*)\}")


def render_summary(
    rule: ThresholdRule | EventRule,
    value: float | None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """The rule's summary with ``{value}`` / ``{threshold}`` / ``{labels.<name>}`` filled
    (``n/a`` when unknown), like Alertmanager's ``{{ $labels.name }}`` templates."""
    threshold = getattr(rule, "threshold", None)
    text = rule.summary or rule.name
    text = text.replace("{value}", "n/a" if value is None else f"{value:.4g}").replace(
        "{threshold}", "n/a" if threshold is None else f"{threshold:.4g}"
    )
    found = labels or {}
    return _LABEL_REF.sub(lambda m: found.get(m.group(1), "n/a"), text)
