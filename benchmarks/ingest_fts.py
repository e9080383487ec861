"""What the SQLite FTS5 search index costs the writer, and what indexing it after commit would.

Same workload and writer connection as ``benchmarks/ingest_cpu.py`` (real OTel SDK spans, ~600
characters of message text per side, redacted; 8 requests of 100 spans per transaction into a
store prefilled with 20k spans). Three variants of the write stage, each in a fresh store:

* ``triggers``: the schema as migrated (``search_0001``): the FTS5 insert trigger indexes each
  call inside the write transaction;
* ``none``: the insert trigger dropped, nothing indexed (the floor);
* ``deferred``: the insert trigger dropped; after each committed batch an indexer adds the rows
  past a rowid watermark to the index in a transaction of its own (one
  ``INSERT INTO llm_calls_fts .. SELECT .. WHERE rowid > ?`` every ``--index-every`` batches),
  the design proposed in issue 18.

CPU time of this process (``time.process_time``), per span, best of ``--repeat``:

    python benchmarks/ingest_fts.py --dir /dev/shm
    python benchmarks/ingest_fts.py --dir /dev/shm --variants deferred,triggers,none,triggers

The first variant of a process runs cold (measured up to +40 us/span): compare variants run
after it, or list one twice.

Prints ``RESULT ingest_fts_<variant>_write_us_per_span`` and, for ``deferred``,
``RESULT ingest_fts_deferred_index_us_per_span`` (the indexer's own cost).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import build_bodies
from ingest_cpu import MAX_TEXT, fresh_ids, prefill

from collector.cost.prices import PriceTable
from collector.ingest import decode as codec
from collector.ingest.prepare import Item, prepare
from collector.ingest.writer import write_batch, writer_connection
from collector.store import engine as store_engine

INDEX = (
    "INSERT INTO llm_calls_fts(rowid, input_text, output_text) "
    "SELECT rowid, input_text, output_text FROM llm_calls WHERE rowid > ? AND rowid <= ? "
    "AND (input_text IS NOT NULL OR output_text IS NOT NULL)"
)


def run_variant(
    variant: str, prepared: list[list[Item]], args: argparse.Namespace, db: str
) -> tuple[float, float, int]:
    """(write CPU us/span, indexer CPU us/span, rows in the FTS index at the end)."""
    prices = PriceTable.load()
    url = f"sqlite:///{db}"
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    bind = writer_connection(engine)
    watermark = 0

    def index() -> None:
        nonlocal watermark
        with bind.begin():
            hi = bind.exec_driver_sql("SELECT max(rowid) FROM llm_calls").scalar() or 0
            bind.exec_driver_sql(INDEX, (watermark, hi))
            watermark = hi

    try:
        if variant != "triggers":
            bind.exec_driver_sql("DROP TRIGGER llm_calls_fts_ai")
            bind.commit()
        all_items = [it for items in prepared for it in items]
        prefill(bind, all_items, args.prefill, args.group * len(prepared[0]), prices)
        if variant == "deferred":
            index()
        best_w = best_i = float("inf")
        for run in range(args.repeat):
            rng = random.Random(1000 + run)
            items = [fresh_ids(it, rng) for _ in range(args.write_rounds) for it in prepared]
            groups = [items[i : i + args.group] for i in range(0, len(items), args.group)]
            n = sum(len(it) for it in items)
            t_w = t_i = 0.0
            for k, g in enumerate(groups):
                t0 = time.process_time()
                write_batch(bind, [("default", it) for it in g], prices, max_text_chars=MAX_TEXT)
                t1 = time.process_time()
                if variant == "deferred" and (
                    (k + 1) % args.index_every == 0 or k == len(groups) - 1
                ):
                    index()
                t_w += t1 - t0
                t_i += time.process_time() - t1
            best_w, best_i = min(best_w, t_w / n * 1e6), min(best_i, t_i / n * 1e6)
        docs = bind.exec_driver_sql("SELECT count(*) FROM llm_calls_fts_docsize").scalar() or 0
        bind.commit()
        return best_w, best_i, docs
    finally:
        bind.close()
        engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--spans-per-request", type=int, default=100)
    ap.add_argument("--group", type=int, default=8, help="requests per write transaction")
    ap.add_argument("--write-rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prefill", type=int, default=20_000)
    ap.add_argument("--index-every", type=int, default=1, help="batches per indexer run")
    ap.add_argument("--variants", default="triggers,none,deferred")
    ap.add_argument("--dir", default=None, help="folder of the SQLite stores")
    args = ap.parse_args()

    bodies = build_bodies(args.requests, args.spans_per_request, 1)
    batches = [codec.decode(b, codec.PROTOBUF) for b in bodies]
    prepared = [prepare(b.spans, MAX_TEXT, "redacted")[0] for b in batches]
    with tempfile.TemporaryDirectory(prefix="driftline-fts-", dir=args.dir) as tmp:
        # a variant may be listed twice (e.g. first and last, to see the order's effect)
        for k, variant in enumerate(args.variants.split(",")):
            w, i, docs = run_variant(variant, prepared, args, f"{tmp}/{k}-{variant}.db")
            print(f"{variant}: {docs} calls in the FTS index at the end")
            print(f"RESULT ingest_fts_{variant}_write_us_per_span={w:.1f} us")
            if variant == "deferred":
                print(f"RESULT ingest_fts_deferred_index_us_per_span={i:.1f} us")
                print(f"RESULT ingest_fts_deferred_total_us_per_span={w + i:.1f} us")


if __name__ == "__main__":
    main()
