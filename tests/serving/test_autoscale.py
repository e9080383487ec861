"""The desired-replica signal: demand sizing, SLO pressure, warm buffer, slow scale-down."""

from __future__ import annotations

from serving.autoscale import Autoscaler
from serving.fleet_config import AutoscaleConfig


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_scale_up_at_once_with_buffer_and_down_only_after_the_window() -> None:
    clock = Clock()
    cfg = AutoscaleConfig(
        target_in_flight=4, warm_buffer=1, scale_down_window_s=300, window_s=60, max_replicas=20
    )
    s = Autoscaler(cfg, clock=clock)
    assert s.desired("m", replicas=1) == 1  # idle: 0 + warm buffer
    s.in_flight["m"], s.queued["m"] = 10, 6  # 16 requests / 4 per replica = 4, + 1 buffer
    assert s.desired("m", replicas=2) == 5
    s.in_flight["m"], s.queued["m"] = 1, 0
    clock.t += 120
    assert s.desired("m", replicas=5) == 5  # held: the 5 is still in the 300 s window
    clock.t += 200
    assert s.desired("m", replicas=5) == 2  # aged out: ceil(1 / 4) + 1


def test_slo_pressure_adds_a_replica_beyond_demand() -> None:
    clock = Clock()
    s = Autoscaler(AutoscaleConfig(ttft_p95_slo_s=1.0, warm_buffer=0), clock=clock)
    for v in [0.2] * 90 + [3.0] * 10:
        s.ttft_s["m"].add(v)
    assert s.desired("m", replicas=3) == 4  # p95 TTFT 3 s > 1 s with little queued demand
    clock.t += 61  # observations left the 60 s window: no pressure, but the 4 is held
    assert s.desired("m", replicas=4) == 4


def test_bounds_clamp_the_recommendation() -> None:
    s = Autoscaler(AutoscaleConfig(min_replicas=2, max_replicas=3, target_in_flight=1))
    assert s.desired("m", replicas=2) == 2
    s.queued["m"] = 50
    assert s.desired("m", replicas=2) == 3
