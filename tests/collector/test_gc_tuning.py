"""The collector process's garbage-collector settings (run in a child process: they are global)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import gc
from driftline.commands import GC_GEN0_THRESHOLD, tune_gc
before = gc.get_threshold()
tune_gc()
after = gc.get_threshold()
assert after == (GC_GEN0_THRESHOLD, before[1], before[2]), (before, after)
assert gc.get_freeze_count() > 0
assert gc.isenabled()
"""


def test_tune_gc_freezes_start_up_objects_and_raises_gen0_threshold() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
