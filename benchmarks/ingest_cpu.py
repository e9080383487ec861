"""In-process CPU cost of the ingest hot path, per span: decode, prepare, write.

Bodies come from ``benchmarks/ingest.py`` (real OTel SDK spans, ~1 KB of message text each,
100 spans per request). Each stage runs on the same bodies in this process and is timed with
``time.process_time`` (CPU seconds of this process, all threads), so the numbers hold on a busy
machine where wall-clock throughput does not:

* ``decode``: ``collector.ingest.decode.decode`` (protobuf -> ``SpanData``);
* ``prepare``: ``collector.ingest.prepare.prepare`` under the capture mode (default
  ``redacted``, the product default; ``full`` is reported too);
* ``write``: ``collector.ingest.writer.write_batch`` through a connection set up like the
  writer thread's (``writer_connection``) into a SQLite store (WAL, ``synchronous=FULL``)
  already holding ``--prefill`` spans (default 20k, the middle of a ``benchmarks/ingest.py``
  run: the random trace-id keys make the cost per span grow with the store), ``--group``
  requests per transaction as the writer's group commit takes them under load.

    python benchmarks/ingest_cpu.py                  # 30 requests x 100 spans, best of 3
    python benchmarks/ingest_cpu.py --profile prepare

Prints ``RESULT ingest_cpu_<stage>_us_per_span=<x> us`` per stage and
``RESULT ingest_cpu_us_per_span=<x> us`` (decode + prepare(redacted) + write), the best of
``--repeat`` runs, and the single-core ceiling ``1e6 / total`` spans/s it implies.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import build_bodies

from collector.cost.prices import PriceTable
from collector.ingest import decode as codec
from collector.ingest.prepare import Item, prepare
from collector.ingest.writer import write_batch, writer_connection
from collector.store import engine as store_engine

MAX_TEXT = 1_000_000


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def fresh_ids(items: list[Item], rng: random.Random) -> list[Item]:
    """The same spans under new random trace and response ids (inserts, not upserts)."""
    out = []
    for it in items:
        trace = f"{rng.getrandbits(128):032x}"
        ex = it.extract
        if ex is not None:
            ex = replace(ex, trace_id=trace, response_id=f"chatcmpl-{rng.getrandbits(64):016x}")
        out.append(Item(replace(it.span, trace_id=trace), ex))
    return out


def prefill(bind: Any, items: list[Item], spans: int, group_spans: int, prices: Any) -> None:
    """Write ``spans`` spans (copies of ``items`` under fresh ids) before timing."""
    rng = random.Random(0)
    done = 0
    while done < spans:
        batch = fresh_ids(items[: min(group_spans, spans - done)], rng)
        write_batch(bind, [("default", batch)], prices, max_text_chars=MAX_TEXT)
        done += len(batch)


def run_once(
    bodies: list[bytes], capture: str, group: int, rounds: int, bind: Any, prices: Any, run: int
) -> dict[str, float]:
    """CPU seconds of each stage over all bodies, per span."""
    t_dec, batches = _cpu(lambda: [codec.decode(b, codec.PROTOBUF) for b in bodies])
    n = sum(len(b.spans) for b in batches)
    t_prep, prepared = _cpu(lambda: [prepare(b.spans, MAX_TEXT, capture) for b in batches])
    assert all(not errors for _, errors in prepared), "benchmark spans must all be valid"
    t_full, _ = _cpu(lambda: [prepare(b.spans, MAX_TEXT, "full") for b in batches])

    # several rounds (fresh ids each): the WAL checkpoint every few transactions is included
    rng = random.Random(1000 + run)
    items = [fresh_ids(it, rng) for _ in range(rounds) for it, _ in prepared]
    groups = [items[i : i + group] for i in range(0, len(items), group)]
    t_write, _ = _cpu(
        lambda: [
            write_batch(bind, [("default", it) for it in g], prices, max_text_chars=MAX_TEXT)
            for g in groups
        ]
    )
    t_write /= rounds
    return {
        "decode": t_dec / n,
        "prepare": t_prep / n,
        "prepare_full": t_full / n,
        "write": t_write / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--spans-per-request", type=int, default=100)
    ap.add_argument("--group", type=int, default=8, help="requests per write transaction")
    ap.add_argument("--capture", choices=["none", "redacted", "full"], default="redacted")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--write-rounds",
        type=int,
        default=4,
        help="the write stage writes the spans this many times (fresh ids each)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--dir",
        default=None,
        help="folder of the SQLite store (default: the system temp folder; /dev/shm takes the "
        "disk out of A/B comparisons)",
    )
    ap.add_argument(
        "--prefill",
        type=int,
        default=20_000,
        help="spans in the store before the write stage is timed (write cost grows with it)",
    )
    ap.add_argument(
        "--profile",
        choices=["decode", "prepare", "write"],
        default=None,
        help="print a cProfile of one stage instead of timing",
    )
    args = ap.parse_args()

    bodies = build_bodies(args.requests, args.spans_per_request, args.seed)
    batches = [codec.decode(b, codec.PROTOBUF) for b in bodies]
    prepared = [prepare(b.spans, MAX_TEXT, args.capture)[0] for b in batches]
    all_items = [it for items in prepared for it in items]
    prices = PriceTable.load()
    with tempfile.TemporaryDirectory(prefix="driftline-cpu-", dir=args.dir) as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        store_engine.upgrade(url)
        engine = store_engine.make_engine(url)
        bind = writer_connection(engine)
        try:
            t0 = time.perf_counter()
            group_spans = args.group * args.spans_per_request
            prefill(bind, all_items, args.prefill, group_spans, prices)
            print(f"prefilled {args.prefill} spans in {time.perf_counter() - t0:.1f} s")
            if args.profile:
                stage: Callable[[], Any] = {
                    "decode": lambda: [codec.decode(b, codec.PROTOBUF) for b in bodies],
                    "prepare": lambda: [prepare(b.spans, MAX_TEXT, args.capture) for b in batches],
                    "write": lambda: prefill(bind, all_items, len(all_items), group_spans, prices),
                }[args.profile]
                prof = cProfile.Profile(time.process_time)
                prof.runcall(stage)
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                return
            runs = [
                run_once(bodies, args.capture, args.group, args.write_rounds, bind, prices, i)
                for i in range(args.repeat)
            ]
        finally:
            bind.close()
            engine.dispose()
    best = {k: min(r[k] for r in runs) * 1e6 for k in runs[0]}
    total = best["decode"] + best["prepare"] + best["write"]
    spans = args.requests * args.spans_per_request
    print(
        f"{spans} spans, capture={args.capture}, {args.group} requests per transaction into a "
        f"store of {args.prefill}+ spans, best of {args.repeat} (CPU time of this process)"
    )
    for k, v in best.items():
        print(f"RESULT ingest_cpu_{k}_us_per_span={v:.1f} us")
    print(f"RESULT ingest_cpu_us_per_span={total:.1f} us")
    print(f"RESULT ingest_cpu_ceiling_spans_per_s={1e6 / total:.0f} spans/s")


if __name__ == "__main__":
    main()
