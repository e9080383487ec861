"""The demo stops its children one by one, newest first: producers (load, gateway) have ended
before the collector, started first, gets SIGTERM."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from driftline.demo.processes import Processes

CHILD = """
import signal, sys, time
def bye(*_):
    time.sleep(float(sys.argv[4]))  # a producer flushing its last spans
    with open(sys.argv[2], "a") as f:
        f.write(f"{sys.argv[1]} {time.time()}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(sys.argv[3], "w").close()
while True:
    time.sleep(0.1)
"""


def test_stop_ends_producers_before_the_collector(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    log = tmp_path / "order.txt"
    # the collector ends fastest: stopped all at once, it would end first
    for name, flush_s in (("collector", "0.05"), ("gateway", "0.4"), ("load-1", "0.8")):
        ready = tmp_path / f"{name}.ready"
        argv = [sys.executable, "-c", CHILD, name, str(log), str(ready), flush_s]
        procs.start(name, argv, dict(os.environ))
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    procs.stop()
    ended = [line.split() for line in log.read_text().splitlines()]
    assert [n for n, _ in ended] == ["load-1", "gateway", "collector"]
    times = [float(t) for _, t in ended]
    assert times == sorted(times)
