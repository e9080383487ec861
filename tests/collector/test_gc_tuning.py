"""The garbage-collector settings of the collector process and of ``driftline spool process``
(run in child processes: they are global)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


PROCESS_CHILD = """
import gc, os, signal, sys, threading, time
from pathlib import Path
from click.testing import CliRunner
from driftline.commands import spool
from collector.spool.processor import GC_GEN0_THRESHOLD
from collector.spool.status import STATUS_FILE

tmp = Path(sys.argv[1])
before = gc.get_threshold()
seen = []

def watch():
    while not (tmp / "sp" / STATUS_FILE).exists():
        time.sleep(0.05)
    seen.append((gc.get_threshold(), gc.get_freeze_count()))
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
args = ["process", "--spool-dir", str(tmp / "sp"), "--database-url", f"sqlite:///{tmp}/d.db"]
result = CliRunner().invoke(spool, args)
assert result.exit_code == 0, (result.output, result.exception)
(threshold, frozen), = seen
assert threshold == (GC_GEN0_THRESHOLD, before[1], before[2]), (before, threshold)
assert frozen > 0
"""


def test_spool_process_command_tunes_gc_as_the_processor_process(tmp_path: Path) -> None:
    """``driftline spool process`` (external processor mode) runs with the GC settings of the
    supervised processor process (:func:`collector.spool.processor.tune_gc`) while it drains."""
    (tmp_path / "sp").mkdir()
    env = {**os.environ, "DRIFTLINE_SPOOL_PREPARE_WORKERS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", PROCESS_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
