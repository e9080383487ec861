"""Spool processor throughput on its own: spans/s from a full spool into an empty SQLite store.

The spool is filled first with ``benchmarks/ingest.py``'s request bodies (real OTel SDK spans,
~1 KB of message text each, 100 per request), so the receiver costs nothing while the processor
runs; then :func:`collector.spool.worker.run_processor` (the code of the processor process:
the span writer, log joiner, feedback and KPI hooks) drains it in this process. Timed until the
committed spool offset reaches the end of the spool; the stored span count is checked.

    python benchmarks/spool_drain.py                    # 400 requests x 100 spans
    python benchmarks/spool_drain.py --profile          # cProfile of the processor's threads
    DRIFTLINE_SPOOL_PREPARE_WORKERS=0 python benchmarks/spool_drain.py   # decode in-process
    python benchmarks/spool_drain.py --load vs_phoenix  # vs_phoenix.py's ~3 KB spans

Prints ``RESULT spool_drain_spans_per_s=<x> spans/s`` (wall clock) and
``RESULT spool_drain_cpu_us_per_span=<x> us`` (CPU of this process and of its child processes,
e.g. the processor's prepare workers, read from ``/proc`` while it runs).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from ingest import build_bodies
from sqlalchemy import text

from benchmarks import ingest_load as phoenix_load
from collector.settings import load_settings
from collector.spool.log import TRACES_PROTOBUF, Spool, read_offset
from collector.spool.processor import tune_gc
from collector.spool.worker import run_processor
from collector.store import engine as store_engine


def _children_cpu() -> float:
    """CPU seconds of this process's live child processes (Linux ``/proc``; 0 elsewhere)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = list(Path(f"/proc/{os.getpid()}/task").iterdir())
        kids = {c for t in tasks for c in (t / "children").read_text().split()}
        for pid in kids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    except OSError:
        return 0.0
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--spans-per-request", type=int, default=100)
    ap.add_argument("--capture", choices=["none", "redacted", "full"], default="redacted")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", default=None, help="folder of the store and spool")
    ap.add_argument("--profile", action="store_true", help="cProfile the drain (all threads)")
    ap.add_argument(
        "--load",
        choices=["ingest", "vs_phoenix"],
        default="ingest",
        help="whose bodies: benchmarks/ingest.py's (~1 KB of text a span, default) or "
        "benchmarks/vs_phoenix.py's (~3 KB a span, gen_ai and OpenInference keys; 100 spans "
        "per request whatever --spans-per-request says)",
    )
    args = ap.parse_args()

    if args.load == "vs_phoenix":
        args.spans_per_request = phoenix_load.SPANS_PER_REQUEST
        bodies = phoenix_load.build_bodies(args.requests, np.random.default_rng(args.seed))
    else:
        bodies = build_bodies(args.requests, args.spans_per_request, args.seed)
    with tempfile.TemporaryDirectory(prefix="driftline-drain-", dir=args.dir) as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        store_engine.upgrade(url)
        spool_dir = Path(tmp) / "spool"
        spool = Spool(spool_dir)
        futs = [spool.append(TRACES_PROTOBUF, "default", b, time.time_ns()) for b in bodies]
        end = max(f.result() for f in futs)
        spool.close()
        settings = load_settings(
            database_url=url,
            capture_content=args.capture,
            spool_dir=spool_dir,
            spool_keep_s=86_400.0,
        )
        stop = threading.Event()

        kids_cpu = [0.0]

        def watch() -> None:
            while read_offset(spool_dir) < end:
                kids_cpu[0] = max(kids_cpu[0], _children_cpu())
                time.sleep(0.01)
            stop.set()

        profs: list[cProfile.Profile] = []
        if args.profile:
            from collector.ingest.writer import BatchWriter
            from collector.spool.processor import SpoolProcessor

            def profiled(fn: Any) -> Any:
                def run(self: Any) -> None:
                    prof = cProfile.Profile(time.thread_time)
                    profs.append(prof)
                    prof.runcall(fn, self)

                return run

            SpoolProcessor._drain = profiled(SpoolProcessor._drain)  # type: ignore[method-assign]
            BatchWriter._run = profiled(BatchWriter._run)  # type: ignore[method-assign]
        w = threading.Thread(target=watch)
        tune_gc()  # as the processor process does (collector.spool.worker.child_main)
        c0, t0 = time.process_time(), time.perf_counter()
        w.start()
        run_processor(settings, [spool_dir], stop.is_set)
        wall = time.perf_counter() - t0
        cpu, kids = time.process_time() - c0, kids_cpu[0]
        eng = store_engine.make_engine(url)
        with eng.connect() as conn:
            stored = int(conn.execute(text("SELECT COUNT(*) FROM spans")).scalar_one())
            calls = int(conn.execute(text("SELECT COUNT(*) FROM llm_calls")).scalar_one())
        eng.dispose()
        n = args.requests * args.spans_per_request
        assert stored == n and calls == n, (stored, calls, n)
        print(f"drained {n} spans in {wall:.2f} s; CPU {cpu:.2f} s here, {kids:.2f} s children")
        print(f"RESULT spool_drain_spans_per_s={n / wall:.0f} spans/s")
        print(f"RESULT spool_drain_cpu_us_per_span={(cpu + kids) / n * 1e6:.1f} us")
        for prof in profs:
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
