"""The judge queue on ``/metrics``, read from the store at scrape time (so a worker that is stuck
cannot hide it): samples by status, the age of the oldest claim, and claims past their lease.

``driftline_judge_samples{status}``: samples ``pending`` / ``claimed``.
``driftline_judge_oldest_claim_seconds``: seconds since the oldest current claim was taken
(0 with none); above ``DRIFTLINE_JUDGE_SAMPLE_TIMEOUT_S`` the worker is stalled.
``driftline_judge_expired_claims``: claims whose lease ran out without a result (their worker
died or stalled); the next round takes them back.
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from collector.store.models.judges import JudgeSample


@dataclass(frozen=True)
class QueueHealth:
    """Counts (samples) and the oldest claim's age (seconds) of the judge queue."""

    pending: int
    claimed: int
    oldest_claim_s: float
    expired_claims: int


def queue_health(engine: Engine, now: dt.datetime | None = None) -> QueueHealth:
    """The judge queue now (all tenants)."""
    now = now or dt.datetime.now(dt.UTC)
    with engine.connect() as conn:
        counts = dict(
            conn.execute(
                select(JudgeSample.status, func.count())
                .where(JudgeSample.status.in_(("pending", "claimed")))
                .group_by(JudgeSample.status)
            ).all()
        )
        oldest = conn.execute(
            select(func.min(JudgeSample.updated_at)).where(JudgeSample.status == "claimed")
        ).scalar_one()
        expired = conn.execute(
            select(func.count()).where(
                JudgeSample.status == "claimed", JudgeSample.lease_expires_at < now
            )
        ).scalar_one()
    if oldest is not None and oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=dt.UTC)
    return QueueHealth(
        pending=int(counts.get("pending", 0)),
        claimed=int(counts.get("claimed", 0)),
        oldest_claim_s=max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0,
        expired_claims=int(expired),
    )


class QueueHealthCollector(Collector):
    """Prometheus collector of :func:`queue_health` (one store query per scrape)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        h = queue_health(self.engine)
        samples = GaugeMetricFamily(
            "driftline_judge_samples", "Judge samples waiting or in progress.", labels=["status"]
        )
        samples.add_metric(["pending"], h.pending)
        samples.add_metric(["claimed"], h.claimed)
        yield samples
        yield GaugeMetricFamily(
            "driftline_judge_oldest_claim_seconds",
            "Seconds since the oldest current judge claim was taken (0: none).",
            value=h.oldest_claim_s,
        )
        yield GaugeMetricFamily(
            "driftline_judge_expired_claims",
            "Judge claims past their lease without a result (worker died or stalled).",
            value=h.expired_claims,
        )


_registered: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()


def register_queue_health(registry: CollectorRegistry, engine: Engine) -> None:
    """Add :class:`QueueHealthCollector` to ``registry`` once (later calls do nothing)."""
    if registry in _registered:
        return
    registry.register(QueueHealthCollector(engine))
    _registered.add(registry)
