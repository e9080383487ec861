"""The autoscaling signal ``driftline_desired_replicas{model}`` and the gateway's ``/metrics``.

Per base model, every scrape computes (seconds; ``n`` = replicas of the model not ejected)::

    demand   = ceil((in_flight + queued) / target_in_flight)        # Little's law sizing
    pressure = queue_p95 > queue_p95_slo_s or ttft_p95 > ttft_p95_slo_s   (last window_s)
    raw      = max(demand, n + 1 if pressure else 0) + warm_buffer  # scale up ahead of demand
    desired  = clamp(max(raw over the last scale_down_window_s), min_replicas, max_replicas)

Scale-up is immediate (the raw value enters the max at once) and carries ``warm_buffer`` spare
replicas, because a new engine needs minutes to load weights; scale-down only happens once the
higher recommendations have aged out of the window (the HPA's scale-down stabilization window,
Kubernetes docs "Horizontal Pod Autoscaling", ``behavior.scaleDown.stabilizationWindowSeconds``).
The p95s are over the gateway's own observations (queue time at admission, time to first chunk)
in the last ``window_s``; with none the pressure term is off.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serving.fleet_config import AutoscaleConfig

if TYPE_CHECKING:
    from serving.classes import TrafficGate
    from serving.fleet import Fleet


class Window:
    """Observations of the last ``window_s`` seconds (bounded to ``maxlen``)."""

    def __init__(self, window_s: float, clock: Callable[[], float], maxlen: int = 10_000) -> None:
        """``clock`` in seconds."""
        self.window_s = window_s
        self.clock = clock
        self._obs: deque[tuple[float, float]] = deque(maxlen=maxlen)

    def add(self, value: float) -> None:
        """Record one observation now."""
        self._obs.append((self.clock(), value))

    def p95(self) -> float | None:
        """95th percentile (numpy linear, Hyndman & Fan type 7), None with no observation."""
        cutoff = self.clock() - self.window_s
        while self._obs and self._obs[0][0] < cutoff:
            self._obs.popleft()
        if not self._obs:
            return None
        return float(np.percentile([v for _, v in self._obs], 95))


class Autoscaler:
    """Signals per base model and the desired-replica recommendation (module doc)."""

    def __init__(self, config: AutoscaleConfig, clock: Callable[[], float] = time.monotonic):
        """``clock`` in seconds."""
        self.config = config
        self.clock = clock
        self.queue_s: dict[str, Window] = defaultdict(lambda: Window(config.window_s, clock))
        self.ttft_s: dict[str, Window] = defaultdict(lambda: Window(config.window_s, clock))
        self.in_flight: dict[str, int] = defaultdict(int)
        self.queued: dict[str, int] = defaultdict(int)
        self._recent: dict[str, deque[tuple[float, int]]] = defaultdict(deque)

    def desired(self, model: str, replicas: int) -> int:
        """Desired replicas of ``model`` now, with ``replicas`` currently healthy."""
        c = self.config
        demand = math.ceil((self.in_flight[model] + self.queued[model]) / c.target_in_flight)
        q95, t95 = self.queue_s[model].p95(), self.ttft_s[model].p95()
        pressure = (q95 is not None and q95 > c.queue_p95_slo_s) or (
            t95 is not None and t95 > c.ttft_p95_slo_s
        )
        raw = max(demand, replicas + 1 if pressure else 0) + c.warm_buffer
        now = self.clock()
        hist = self._recent[model]
        hist.append((now, raw))
        while hist and hist[0][0] < now - c.scale_down_window_s:
            hist.popleft()
        best = max(v for _, v in hist)
        return max(c.min_replicas, min(c.max_replicas, best))


class GatewayMetrics(Collector):
    """Prometheus collector computed at scrape time from the gateway's live state."""

    def __init__(self, scaler: Autoscaler, fleet: Fleet, gate: TrafficGate) -> None:
        """Reads, never writes, the gateway's objects."""
        self.scaler = scaler
        self.fleet = fleet
        self.gate = gate

    def collect(self) -> Iterator[Metric]:
        """Yield the gauge families (names and units in their help text)."""
        models = sorted({r.spec.base_model() for r in self.fleet.replicas})
        desired = GaugeMetricFamily(
            "driftline_desired_replicas",
            "Replicas the model should have (queue depth, queue time, TTFT p95 vs SLO).",
            labels=["model"],
        )
        actual = GaugeMetricFamily(
            "driftline_replicas", "Replicas of the model not ejected.", labels=["model"]
        )
        q95 = GaugeMetricFamily(
            "driftline_gateway_queue_p95_seconds", "p95 queue time, window.", labels=["model"]
        )
        t95 = GaugeMetricFamily(
            "driftline_gateway_ttft_p95_seconds", "p95 time to first chunk.", labels=["model"]
        )
        for m in models:
            n = self.fleet.healthy_count(m)
            desired.add_metric([m], self.scaler.desired(m, n))
            actual.add_metric([m], n)
            for fam, win in ((q95, self.scaler.queue_s[m]), (t95, self.scaler.ttft_s[m])):
                v = win.p95()
                if v is not None:
                    fam.add_metric([m], v)
        yield from (desired, actual, q95, t95)
        depth = GaugeMetricFamily(
            "driftline_gateway_queue_depth", "Requests queued at the gateway.", labels=["class"]
        )
        running = GaugeMetricFamily(
            "driftline_gateway_in_flight", "Requests at the engines.", labels=["class"]
        )
        for name, c in sorted(self.gate.classes.items()):
            depth.add_metric([name], len(c.waiters))
            running.add_metric([name], c.in_flight)
        yield from (depth, running)
        labels = ["replica", "model"]
        fams = {
            "outstanding": GaugeMetricFamily(
                "driftline_replica_outstanding", "Gateway requests in flight.", labels=labels
            ),
            "ejected": GaugeMetricFamily(
                "driftline_replica_ejected", "1 while ejected after failures.", labels=labels
            ),
            "queue_depth": GaugeMetricFamily(
                "driftline_replica_queue_depth", "Engine-reported waiting.", labels=labels
            ),
            "kv_cache_usage": GaugeMetricFamily(
                "driftline_replica_kv_cache_usage", "Engine KV-cache use, 0..1.", labels=labels
            ),
        }
        now = self.fleet.clock()
        for r in self.fleet.replicas:
            lab = [r.url, r.spec.base_model()]
            fams["outstanding"].add_metric(lab, r.outstanding)
            fams["ejected"].add_metric(lab, 1.0 if r.ejected_until > now else 0.0)
            for key in ("queue_depth", "kv_cache_usage"):
                v = getattr(r, key)
                if v is not None:
                    fams[key].add_metric(lab, v)
        yield from fams.values()
