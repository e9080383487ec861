"""Per-stage CPU cost of the spool processor's path, microseconds of thread CPU per span.

The stages of one batch of ``benchmarks/ingest.py``'s spans (real OTel SDK spans, ~1 KB of
message text each) as the processor process runs them (its garbage-collector settings,
:func:`collector.spool.processor.tune_gc`, when the tree has them):

* ``prepare``: decode + content policy + extract
  (:func:`~collector.spool.processor.prepare_traces`), in the prepare worker;
* ``compact`` / ``pickle``: what the worker does to return it (the tuples of
  :func:`~collector.spool.processor.compact` when the tree has it, else nothing) and pickling
  it;
* ``unpickle`` / ``expand``: the processor's side of the same;
* ``write_batch``: :func:`~collector.ingest.writer.write_batch` into a SQLite store already
  holding ``--warm-requests`` batches' spans (one transaction per ``--batch`` spans, commit
  included), with its ``finalize`` and the SQL statements also timed on their own;
* ``kpis``: :meth:`~collector.telemetry.kpis.LLMKpis.observe` of the batch's call records.

Thread CPU (``time.thread_time``), not wall time, so that other processes on a shared machine
disturb it less; the best of ``--repeat`` runs of each stage.

    python benchmarks/ingest_stages.py                 # 40 requests x 100 spans
    PYTHONPATH=/other/tree python /other/tree/benchmarks/ingest_stages.py   # A/B

Prints ``RESULT stage_<name>_us_per_span=<x> us`` per stage.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import build_bodies
from prometheus_client import CollectorRegistry

from collector.cost.prices import PriceTable
from collector.ingest import writer as writer_mod
from collector.ingest.normalize import finalize
from collector.settings import load_settings
from collector.spool import processor
from collector.spool.log import TRACES_PROTOBUF
from collector.store import engine as store_engine
from collector.telemetry.kpis import LLMKpis


def _best(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """(result, least thread CPU seconds of ``repeat`` calls)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.thread_time()
        out = fn()
        best = min(best, time.thread_time() - t0)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=40, help="100 spans each")
    ap.add_argument("--warm-requests", type=int, default=120, help="spans stored first, x100")
    ap.add_argument("--batch", type=int, default=1300, help="spans per transaction")
    ap.add_argument("--capture", choices=["none", "redacted", "full"], default="redacted")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tune = getattr(processor, "tune_gc", None)
    if tune is not None:
        tune()
    compact = getattr(processor, "compact", None)
    expand = getattr(processor, "expand", None)
    bodies = build_bodies(args.warm_requests + args.requests, 100, 7)
    warm, bodies = bodies[: args.warm_requests], bodies[args.warm_requests :]
    jobs = [(TRACES_PROTOBUF, i, b, args.capture) for i, b in enumerate(bodies)]
    n = args.requests * 100
    cost: dict[str, float] = {}

    prepared, cost["prepare"] = _best(lambda: processor.prepare_traces(jobs, 1_000_000), 2)
    if compact is not None and expand is not None:
        sent, cost["compact"] = _best(lambda: compact(prepared), args.repeat)
    else:
        sent, cost["compact"] = prepared, 0.0
    blob, cost["pickle"] = _best(lambda: pickle.dumps(sent, pickle.HIGHEST_PROTOCOL), args.repeat)
    got, cost["unpickle"] = _best(lambda: pickle.loads(blob), args.repeat)
    if expand is not None and compact is not None:
        got, cost["expand"] = _best(lambda: expand(got), args.repeat)
    else:
        cost["expand"] = 0.0
    items = [it for p in got if not isinstance(p, str) for it in p[0]]
    prices = PriceTable.load(load_settings().prices)
    exs = [it.extract for it in items if it.extract is not None]
    records, cost["finalize"] = _best(
        lambda: [finalize(e, tenant="default", prices=prices) for e in exs], args.repeat
    )
    kpis = LLMKpis.create(CollectorRegistry())
    _, cost["kpis"] = _best(lambda: kpis.observe(records), args.repeat)

    warm_items = [
        it
        for p in processor.prepare_traces(
            [(TRACES_PROTOBUF, i, b, args.capture) for i, b in enumerate(warm)], 1_000_000
        )
        if not isinstance(p, str)
        for it in p[0]
    ]
    sql: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="driftline-stages-") as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        store_engine.upgrade(url)
        engine = store_engine.make_engine(url)
        conn = writer_mod.writer_connection(engine)
        for i in range(0, len(warm_items), args.batch):
            writer_mod.write_batch(conn, [("default", warm_items[i : i + args.batch])], prices)
        real = conn.exec_driver_sql

        def timed(statement: str, *a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return real(statement, *a, **k)
            finally:
                key = " ".join(statement.split()[:3])
                sql[key] = sql.get(key, 0.0) + time.thread_time() - t0

        conn.exec_driver_sql = timed  # type: ignore[method-assign]
        t0 = time.thread_time()
        for i in range(0, len(items), args.batch):
            writer_mod.write_batch(conn, [("default", items[i : i + args.batch])], prices)
        cost["write_batch"] = time.thread_time() - t0
        conn.close()
        engine.dispose()
    print(f"{n} spans, {len(blob) / n:.0f} pickled bytes per span, capture {args.capture}")
    for name, seconds in cost.items():
        print(f"RESULT stage_{name}_us_per_span={seconds / n * 1e6:.1f} us")
    for key, seconds in sorted(sql.items(), key=lambda kv: -kv[1]):
        print(f"  write_batch SQL {key!r}: {seconds / n * 1e6:.1f} us per span")


if __name__ == "__main__":
    main()
