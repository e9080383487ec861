"""Scheduled alert work: ``jobs(settings)`` for ``driftline.jobs.JOB_FACTORIES``.

* ``alerts.evaluate`` (every ``DRIFTLINE_ALERT_EVAL_INTERVAL_S``): for each tenant with enabled
  rules or pending events, :func:`alerts.runtime.evaluate_tenant`, with the
  collector's health checks (:class:`HealthWatcher`) as ``collector_unhealthy`` events. Call
  statistics read the collector's lake (:func:`collector.lake.jobs.lake_of`: sealed hours from
  Parquet, the hot tail from the store), the store alone when the lake is off.
* ``alerts.deliver`` (every ``DRIFTLINE_ALERT_DELIVERY_POLL_S``): one
  :class:`~alerts.delivery.DeliveryWorker` round; the worker is built on the first
  run (its metrics go to the app's registry) and kept for the app's lifetime. It runs in its own
  scheduler thread, so slow receivers never delay evaluation or ingestion.

One tenant's failure is logged and counted (``driftline_alert_evaluation_failures_total``) and
the others are still evaluated.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter

from alerts.delivery import DeliveryWorker
from alerts.rules import AlertEvent
from alerts.runtime import (
    AlertRuntime,
    RuntimeSlot,
    evaluate_tenant,
    load_settings,
    make_runtime,
    tenants_to_evaluate,
)
from collector.egress import EgressPolicy
from collector.lake.jobs import lake_of
from collector.lake.layout import Lake
from collector.scheduler import Job, JobContext

log = logging.getLogger(__name__)

#: counters whose increase between two evaluations means the collector is unhealthy
HEALTH_COUNTERS: dict[str, str] = {
    "spans_rejected": "driftline_spans_rejected_total",
    "requests_refused": "driftline_ingest_requests_refused_total",
    "scrape_failures": "driftline_engine_scrape_failures_total",
}
QUEUE_GAUGE = "driftline_write_queue_spans"


def _metric_total(registry: CollectorRegistry, sample_name: str) -> float | None:
    """Sum of every sample called ``sample_name`` (all label sets); 0 for a registered family
    without samples yet (a labelled counter before its first increment); None when the
    registry has no such metric."""
    total: float | None = None
    for metric in registry.collect():
        if sample_name not in (metric.name, metric.name + "_total"):
            continue
        total = total or 0.0
        for smp in metric.samples:
            if smp.name == sample_name:
                total += float(smp.value)
    return total


@dataclass
class HealthWatcher:
    """Turns the collector's own metrics into ``collector_unhealthy`` events.

    Each :meth:`check` compares the counters in :data:`HEALTH_COUNTERS` with the previous
    check (an increase is unhealthy: spans rejected, requests refused, engine scrapes failed)
    and the write-queue gauge with ``queue_saturation * queue_max_spans``. While a check is
    unhealthy it yields a breaching event every time (label ``check``); the first healthy
    check after that yields one ``resolved`` event. Counters absent from the registry are
    skipped (unknown, not healthy).
    """

    queue_max_spans: int | None
    queue_saturation: float = 0.9
    _last: dict[str, float] = field(default_factory=dict)
    _unhealthy: set[str] = field(default_factory=set)

    def check(self, registry: CollectorRegistry, now: float) -> list[AlertEvent]:
        """Events for this check at ``now`` (unix seconds)."""
        verdicts: dict[str, tuple[bool, float, str]] = {}
        for check, name in HEALTH_COUNTERS.items():
            total = _metric_total(registry, name)
            if total is None:
                continue
            prev = self._last.get(check)
            self._last[check] = total
            if prev is None:
                continue
            delta = total - prev
            verdicts[check] = (delta > 0, delta, f"{name} rose by {delta:g}")
        queued = _metric_total(registry, QUEUE_GAUGE)
        if queued is not None and self.queue_max_spans:
            ratio = queued / self.queue_max_spans
            text = f"write queue {queued:g} / {self.queue_max_spans} spans ({ratio:.0%})"
            verdicts["queue_saturation"] = (ratio >= self.queue_saturation, ratio, text)
        out: list[AlertEvent] = []
        for check, (bad, value, text) in sorted(verdicts.items()):
            if bad:
                self._unhealthy.add(check)
            elif check in self._unhealthy:
                self._unhealthy.discard(check)
            else:
                continue
            out.append(
                AlertEvent(
                    kind="collector_unhealthy",
                    at=now,
                    labels={"check": check},
                    annotations={"description": text},
                    value=value,
                    resolved=not bad,
                )
            )
        return out


def _external_url(ctx: JobContext, rt: AlertRuntime) -> str:
    if rt.settings.external_url:
        return rt.settings.external_url
    s = ctx.settings
    return f"http://{getattr(s, 'host', '127.0.0.1')}:{getattr(s, 'http_port', 4318)}"


def evaluate_all(
    ctx: JobContext,
    rt: AlertRuntime,
    health: HealthWatcher,
    failures: Counter,
    now: float,
) -> int:
    """One evaluation round over every tenant; returns the number of tenants evaluated.

    An unusable ``DRIFTLINE_LAKE_URL`` is logged and the round reads the store alone (it keeps
    every call the lake holds, so the values are the same, only slower to compute)."""
    health_events = health.check(ctx.registry, now)
    lake: Lake | None
    try:
        lake = lake_of(ctx.settings)
    except ValueError as exc:
        log.error("alerts: lake unusable, reading the store alone: %s", exc)
        lake = None
    directory = rt.directory(ctx.engine)
    url = _external_url(ctx, rt)
    done = 0
    for tenant in tenants_to_evaluate(ctx.engine):
        try:
            evaluate_tenant(
                ctx.engine,
                tenant,
                now=now,
                receivers=directory,
                external_url=url,
                extra_events=health_events,
                lake=lake,
            )
            done += 1
        except Exception:
            failures.labels(tenant).inc()
            log.exception("alert evaluation of tenant %r failed", tenant)
    return done


def jobs(
    settings: Any,
    *,
    clock: Callable[[], float] = time.time,
    rng: np.random.Generator | None = None,
    runtime: RuntimeSlot | None = None,
) -> list[Job]:
    """The alert jobs for a collector with ``settings`` (alert settings from the environment).

    ``clock`` gives unix seconds; ``rng`` draws the delivery backoff jitter (default: a
    generator seeded from the OS); ``runtime`` is the app's slot the jobs share their
    :class:`AlertRuntime` through with its REST API (None: kept to the jobs).

    Raises:
        ConfigError: a ``DRIFTLINE_ALERT_*`` variable is invalid;
        ReceiverConfigError: the receivers file is missing or invalid — at start-up.
    """
    alert_settings = load_settings()
    if not alert_settings.enabled:
        return []
    built = make_runtime(alert_settings)  # fail at start-up on a bad receivers file
    rt = runtime.offer(built) if runtime is not None else built
    lock = threading.Lock()
    parts: dict[str, Any] = {}

    def setup(ctx: JobContext) -> tuple[AlertRuntime, dict[str, Any]]:
        with lock:
            if not parts:
                parts["rt"] = rt
                parts["health"] = HealthWatcher(
                    getattr(ctx.settings, "queue_max_spans", None),
                    alert_settings.queue_saturation,
                )
                parts["failures"] = Counter(
                    "driftline_alert_evaluation_failures",
                    "Tenant alert evaluations that raised.",
                    ["tenant"],
                    registry=ctx.registry,
                )
                parts["worker"] = DeliveryWorker(
                    ctx.engine,
                    rt.directory(ctx.engine),
                    registry=ctx.registry,
                    rng=rng if rng is not None else np.random.default_rng(),
                    policy=alert_settings.retry_policy(),
                    # receivers reach public addresses, plus DRIFTLINE_EGRESS_ALLOW
                    egress_policy=EgressPolicy.parse(getattr(ctx.settings, "egress_allow", "")),
                    clock=clock,
                )
            return parts["rt"], parts

    def evaluate(ctx: JobContext) -> None:
        rt, p = setup(ctx)
        evaluate_all(ctx, rt, p["health"], p["failures"], clock())

    def deliver(ctx: JobContext) -> None:
        _, p = setup(ctx)
        worker: DeliveryWorker = p["worker"]
        worker.run_once(wait_s=alert_settings.delivery_poll_s)  # slow receivers finish later

    return [
        Job("alerts.evaluate", alert_settings.eval_interval_s, evaluate),
        Job("alerts.deliver", alert_settings.delivery_poll_s, deliver),
    ]
