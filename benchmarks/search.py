"""Benchmark: ``GET /api/v1/calls?q=`` full-text search over N stored calls, against a scan.

Data: N calls (default 200,000; ``--calls 1000000`` for the 1 M figure) in a fresh SQLite store
migrated to every head (so the FTS5 index of ``search_0001`` is filled by its triggers while the
rows are written), each with a prompt and an answer of 20-60 words drawn from a 5,000-word
vocabulary; the query words are a rare word (~1 call in 5,000) and a rare + a common word.

``search_rare_ms`` / ``search_two_words_ms``: median wall time of
:func:`collector.store.queries.list_calls` with ``q`` (first page of 100, newest first) over 7
runs. ``scan_rare_ms``: the null baseline in the same run, the same page with
``input_text LIKE '%word%' OR output_text LIKE '%word%'`` instead of the index (what a store
without the index has to do; it is also not word-aware). ``search_speedup_vs_scan`` is their
ratio. ``insert_calls_per_s``: rows written per second with the triggers on (bulk executemany);
``insert_no_index_calls_per_s``: the same rows into a store whose FTS triggers were dropped
(the cost of the index on writes; text-less calls skip the triggers' work).

Usage: ``.venv/bin/python benchmarks/search.py [--calls 200000]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import and_, literal_column, or_, select, text

from collector.store import engine as store_engine
from collector.store import queries
from collector.store.models import LLMCall


def _fill(url: str, n: int, rng: np.random.Generator) -> float:
    vocab = [f"w{i:04d}" for i in range(5000)]
    probs = 1.0 / np.arange(1, 5001)
    probs /= probs.sum()  # Zipf-like: w0000 common, w4999 rare
    eng = store_engine.make_engine(url)
    rows = []
    for i in range(n):
        words = rng.choice(len(vocab), size=int(rng.integers(20, 60)), p=probs)
        half = len(words) // 2
        rows.append(
            (
                "default",
                f"{i:032x}",
                f"{i:016x}",
                f"c{i}",
                "chat",
                "ok",
                "[]",
                "semconv",
                1_780_000_000_000_000_000 + i * 10**6,
                " ".join(vocab[w] for w in words[:half]),
                " ".join(vocab[w] for w in words[half:]),
            )
        )
    t0 = time.perf_counter()
    raw = eng.raw_connection()
    try:
        cur = raw.cursor()
        for k in range(0, n, 10_000):
            cur.executemany(
                "INSERT INTO llm_calls (tenant, trace_id, span_id, call_id, operation, status, "
                "flags, dialect, start_unix_nano, input_text, output_text) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                rows[k : k + 10_000],
            )
            raw.commit()
    finally:
        raw.close()
    elapsed = time.perf_counter() - t0
    eng.dispose()
    return n / elapsed


def _median_ms(fn: object, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        store_engine.upgrade(url)
        rate = _fill(url, args.calls, np.random.default_rng(0))
        bare = f"sqlite:///{Path(tmp) / 'bare.db'}"
        store_engine.upgrade(bare)
        e2 = store_engine.make_engine(bare)
        with e2.begin() as c2:
            for trig in ("llm_calls_fts_ai", "llm_calls_fts_ad", "llm_calls_fts_au"):
                c2.execute(text(f"DROP TRIGGER {trig}"))
        e2.dispose()
        bare_rate = _fill(bare, args.calls, np.random.default_rng(0))
        eng = store_engine.make_engine(url)
        rare, common = "w4321", "w0001"
        t = LLMCall.__table__
        with eng.connect() as conn:

            def fts(q: str) -> int:
                items, _ = queries.list_calls(conn, "default", queries.CallFilter(q=q), limit=100)
                return len(items)

            def scan() -> int:
                like = f"%{rare}%"
                start = literal_column("coalesce(llm_calls.start_unix_nano, 0)")
                q = (
                    select(t)
                    .where(
                        and_(
                            t.c.tenant == "default",
                            or_(t.c.input_text.like(like), t.c.output_text.like(like)),
                        )
                    )
                    .order_by(start.desc(), t.c.trace_id.desc(), t.c.span_id.desc())
                    .limit(101)
                )
                return len(list(conn.execute(q)))

            assert fts(rare) == min(scan(), 100), "index and scan disagree"
            conn.execute(text("SELECT 1"))
            rare_ms = _median_ms(lambda: fts(rare))
            two_ms = _median_ms(lambda: fts(f"{rare} {common}"))
            scan_ms = _median_ms(scan)
        eng.dispose()
    print(f"RESULT insert_calls_per_s={rate:.0f} calls/s")
    print(f"RESULT insert_no_index_calls_per_s={bare_rate:.0f} calls/s")
    print(f"RESULT search_rare_ms={rare_ms:.2f} ms")
    print(f"RESULT search_two_words_ms={two_ms:.2f} ms")
    print(f"RESULT scan_rare_ms={scan_ms:.2f} ms")
    print(f"RESULT search_speedup_vs_scan={scan_ms / rare_ms:.1f} x")


if __name__ == "__main__":
    main()
