"""Attack report on issue 35, item 9: ``/healthz``'s stall clock starts when records became
pending without progress, not at the previous probe.

Idle longer than ``DRIFTLINE_SPOOL_STALL_S``, then one ordinary request and one probe at once
read "spool processor has not advanced for 16 s" (the clock ran from the previous probe,
made while nothing was pending)."""

from __future__ import annotations

import time
from pathlib import Path

from collector.spool.log import TRACES_PROTOBUF, Spool
from collector.spool.quarantine import JournalFollower
from collector.spool.stall import StallWatch, spool_problems
from tests.collector.test_otlp_http import pb_request


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_probe_after_a_long_idle_period_and_a_new_request_is_not_a_stall(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool")  # no processor: what is appended stays pending
    clock = Clock()
    watch = StallWatch(spool, clock=clock)
    journal = JournalFollower(spool.dir)
    try:
        assert watch.stalled_s() == 0.0  # idle probe
        clock.now += 3_600  # an hour without a probe, nothing pending
        spool.append(TRACES_PROTOBUF, "a", pb_request(1), time.time_ns()).result(5)
        assert spool.unprocessed_bytes > 0
        assert spool_problems(watch, journal, stall_s=10, window_s=60) == []
        # the same records still pending: now it is a stall, counted from that first probe
        clock.now += 12
        (problem,) = spool_problems(watch, journal, stall_s=10, window_s=60)
        assert "has not advanced for 12 s" in problem
        # progress clears it
        spool.commit(spool.durable_end)
        assert watch.stalled_s() == 0.0
    finally:
        spool.close()


def test_a_stall_is_counted_from_the_first_probe_that_saw_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    clock = Clock()
    watch = StallWatch(spool, clock=clock)
    try:
        spool.append(TRACES_PROTOBUF, "a", pb_request(1), time.time_ns()).result(5)
        assert watch.stalled_s() == 0.0
        clock.now += 5
        assert watch.stalled_s() == 5.0
        clock.now += 5
        assert watch.stalled_s() == 10.0
        spool.append(TRACES_PROTOBUF, "a", pb_request(1), time.time_ns()).result(5)
        clock.now += 5  # more appended, the offset still where it was: still stalled
        assert watch.stalled_s() == 15.0
    finally:
        spool.close()
