"""Alerting inside a running collector: the receiver directory and one tenant's evaluation.

:class:`DbReceivers` looks receivers up in the receivers file first (read-only, operators'
configuration) and then in the ``alert_receivers`` table (REST API), at send time, so a
receiver created or rotated through the API is used by the next attempt.
:func:`evaluate_tenant` is one evaluation round of one tenant: rules from the table, series
from the lake's query layer (:mod:`alerts.series`: sealed hours from the Parquet lake, the hot
tail from the store), events from the inbox
(:mod:`alerts.events`) plus in-memory ones (collector health), all applied and
enqueued in one transaction. A :class:`RuntimeSlot` shares the settings and the file receivers
between the REST API and the jobs of one app.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from alerts import events as inbox
from alerts import store
from alerts.evaluate import EvaluationResult, evaluate_rules
from alerts.receivers import AlertSettings, Receiver, StaticReceivers, load_receivers
from alerts.rules import AlertEvent, Series, ThresholdRule
from alerts.series import rule_series
from collector.errors import ConfigError
from collector.lake.layout import Lake
from collector.settings import describe_validation_error
from collector.store.models import AlertRule

log = logging.getLogger(__name__)
_LOCK = threading.Lock()


class DbReceivers:
    """A :class:`~alerts.receivers.ReceiverDirectory`: file receivers, then the table."""

    def __init__(self, engine: Engine, static: StaticReceivers) -> None:
        self.engine = engine
        self.static = static

    def get(self, tenant: str, name: str) -> Receiver | None:
        """The receiver ``name`` of ``tenant`` (file first, then ``alert_receivers``), or None
        (also for a row stored before a rule it breaks, e.g. a URL over 2,048 characters:
        logged; its notifications then fail as ``unknown_receiver`` instead of crashing every
        delivery round)."""
        r = self.static.get(tenant, name)
        if r is not None:
            return r
        with Session(self.engine) as s:
            try:
                return store.load_db_receiver(s, tenant, name)
            except ValidationError as exc:
                log.error("receiver %r of tenant %r is invalid, not used: %s", name, tenant, exc)
                return None


@dataclass(frozen=True)
class AlertRuntime:
    """Alert settings and file receivers of one collector app."""

    settings: AlertSettings
    static: StaticReceivers

    def directory(self, engine: Engine) -> DbReceivers:
        """Receiver lookups for ``engine``'s store."""
        return DbReceivers(engine, self.static)


def load_settings() -> AlertSettings:
    """``AlertSettings`` from the environment (``DRIFTLINE_ALERT_*``).

    Raises:
        ConfigError: a variable is invalid (the message names it).
    """
    try:
        return AlertSettings()
    except ValidationError as exc:
        raise ConfigError(
            describe_validation_error(exc).replace("DRIFTLINE_", "DRIFTLINE_ALERT_")
        ) from None


def make_runtime(settings: AlertSettings) -> AlertRuntime:
    """Read the receivers file named by ``settings`` (if any).

    Raises:
        ReceiverConfigError: the file is missing or invalid (names the variable and path).
    """
    static = (
        load_receivers(settings.receivers_file)
        if settings.receivers_file is not None
        else StaticReceivers([])
    )
    return AlertRuntime(settings, static)


class RuntimeSlot:
    """One app's :class:`AlertRuntime`, shared by its REST API and its alert jobs.

    The jobs :meth:`offer` the runtime they built at start-up; without them (scheduler or
    alerting off) :meth:`get` builds one on first use from the environment. Thread-safe.
    """

    def __init__(self) -> None:
        self._runtime: AlertRuntime | None = None

    def offer(self, runtime: AlertRuntime) -> AlertRuntime:
        """Keep ``runtime`` unless one is already kept; returns the kept one."""
        with _LOCK:
            if self._runtime is None:
                self._runtime = runtime
            return self._runtime

    def get(self) -> AlertRuntime:
        """The kept runtime, built from the environment on first use.

        Raises:
            ConfigError, ReceiverConfigError: like :func:`load_settings` / :func:`make_runtime`.
        """
        with _LOCK:
            if self._runtime is None:
                self._runtime = make_runtime(load_settings())
            return self._runtime


def tenants_to_evaluate(engine: Engine) -> list[str]:
    """Tenants with an enabled rule or an unconsumed event, sorted."""
    with Session(engine) as s:
        ruled = s.scalars(
            select(AlertRule.tenant).where(AlertRule.enabled.is_(True)).distinct()
        ).all()
        return sorted(set(ruled) | set(inbox.tenants_with_events(s)))


def evaluate_tenant(
    engine: Engine,
    tenant: str,
    *,
    now: float,
    receivers: DbReceivers | StaticReceivers,
    external_url: str = "",
    extra_events: Sequence[AlertEvent] = (),
    lake: Lake | None = None,
) -> EvaluationResult:
    """Evaluate every enabled rule of ``tenant`` at ``now`` (unix seconds) in one transaction.

    Threshold rules get one sample each (:func:`~alerts.series.rule_series`: call statistics
    from ``lake``'s sealed hours plus the store's hot tail, or the store alone when ``lake`` is
    None); event rules get the tenant's inbox
    events that happened by ``now`` (then marked consumed) plus ``extra_events``. A rule whose
    series cannot be computed (e.g. a filter key the statistic does not know) is logged and
    evaluated without data. Returns what :func:`~alerts.evaluate.evaluate_rules`
    returns.
    """
    with Session(engine) as s, s.begin():
        rules = store.load_rules(s, tenant)
        series: dict[str, list[Series]] = {}
        conn = s.connection()
        for rule in rules:
            if isinstance(rule, ThresholdRule):
                try:
                    series[rule.name] = rule_series(conn, tenant, rule, now, lake=lake)
                except ValueError as exc:
                    log.error(
                        "tenant %r rule %r: cannot compute series: %s", tenant, rule.name, exc
                    )
        pending = inbox.pending_events(s, tenant, until=now)
        result = evaluate_rules(
            s,
            tenant,
            rules,
            now=now,
            receivers=receivers,
            series=series,
            events=[e for _, e in pending] + list(extra_events),
            external_url=external_url,
        )
        inbox.mark_consumed(s, [i for i, _ in pending], now)
    return result
